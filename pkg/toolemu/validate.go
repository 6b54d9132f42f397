package toolemu

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	schemakind "github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// validator checks a strict tool's arguments against its full JSON Schema
// (types, enum, const, required, additionalProperties, nested objects and
// arrays, $ref/$defs, anyOf, bounds, patterns), so an emulated strict call
// is held to what a native strict call guarantees.
type validator struct {
	schema *jsonschema.Schema
}

// compileSchema compiles a tool's parameters. References are resolved
// within the document only: a client's schema must not make the server read
// files or fetch URLs.
func compileSchema(name string, parameters []byte) (*validator, error) {
	if len(bytes.TrimSpace(parameters)) == 0 {
		parameters = []byte(`{"type":"object","properties":{}}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(parameters))
	if err != nil {
		return nil, fmt.Errorf("tool %q: parameters are not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "urn:aptix:tool:" + name
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: parameters: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: parameters are not a valid JSON Schema: %w", name, err)
	}
	return &validator{schema: s}, nil
}

// validate reports the first-level reasons why args do not conform, one
// line per failed keyword.
func (v *validator) validate(args string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return fmt.Errorf("arguments are not JSON: %w", err)
	}
	err = v.schema.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The library's message is a header line ("jsonschema validation failed
	// with 'urn:…'") and an indented list of causes; keep the causes, in a
	// stable order: the library walks the instance's maps, so the order of
	// causes and of additional property names varies from run to run, and
	// the same answer must always get the same warning.
	sortNames(ve)
	lines := strings.Split(ve.Error(), "\n")
	var causes []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")); l != "" {
			causes = append(causes, l)
		}
	}
	if len(causes) == 0 {
		return errors.New(lines[0])
	}
	slices.Sort(causes)
	return errors.New(strings.Join(slices.Compact(causes), "; "))
}

func sortNames(e *jsonschema.ValidationError) {
	if ap, ok := e.ErrorKind.(*schemakind.AdditionalProperties); ok {
		slices.Sort(ap.Properties)
	}
	for _, c := range e.Causes {
		sortNames(c)
	}
}
