package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"
)

// The committed schema files must be exactly what the Go types generate.
func TestSchemasMatchTypes(t *testing.T) {
	for name, v := range Files {
		want, err := Generate(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v (run go generate ./... in pkg/contracts)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from the Go types: run `go generate ./...` in pkg/contracts and commit the result", name)
		}
	}
}

// A request that a client in another language writes from the schema alone
// validates, and one missing a required field does not.
func TestRequestSchemaValidatesEvents(t *testing.T) {
	c := jsv.NewCompiler()
	doc, err := jsv.UnmarshalJSON(mustOpen(t, "agent-execute-request.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("req.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("req.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		event string
		ok    bool
	}{
		{"minimal", `{"conversationId":"c1","turnId":"t1","instruction":"hi"}`, true},
		{"full", `{"conversationId":"c1","turnId":"t1","instruction":"hi","mode":"DDR_CREATION","ragScope":"repo","tags":["a"],"toolsJson":"[]","toolChoiceName":"ddr_document","agentContext":{"backend":"sandbox"},"conversationContext":{"systemPrompt":"boot","defaultTools":[{"type":"function","name":"x"}]}}`, true},
		{"missing instruction", `{"conversationId":"c1","turnId":"t1"}`, false},
		{"wrong type", `{"conversationId":"c1","turnId":"t1","instruction":"hi","tags":"a"}`, false},
		{"unknown field", `{"conversationId":"c1","turnId":"t1","instruction":"hi","bogus":1}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tc.event), &v); err != nil {
				t.Fatal(err)
			}
			err := sch.Validate(v)
			if (err == nil) != tc.ok {
				t.Fatalf("valid=%v, want %v: %v", err == nil, tc.ok, err)
			}
		})
	}
}

func mustOpen(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
