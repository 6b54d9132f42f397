package sandbox_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validate checks a JSON document against a JSON Schema with a real validator.
func validate(t *testing.T, schema map[string]any, doc string) {
	t.Helper()
	c := jsonschema.NewCompiler()
	raw, _ := json.Marshal(schema)
	sdoc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("schema.json", sdoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("arguments %q are not JSON: %v", doc, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("arguments %s do not conform: %v", doc, err)
	}
}
