package conformance

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaJSON holds the required-field schemas of the Open Responses objects
// and streaming events, written for this suite from the specification (see
// README.md for why it is not the specification's own file).
//
//go:embed schema/openresponses.schema.json
var schemaJSON []byte

const schemaURL = "https://aptix.dev/schema/conformance/openresponses.schema.json"

// Validator checks documents against the Open Responses schemas. Its zero
// value is ready to use and safe for concurrent use.
type Validator struct {
	once     sync.Once
	err      error
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

func (v *Validator) schema(def string) (*jsonschema.Schema, error) {
	v.once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
		if err != nil {
			v.err = fmt.Errorf("conformance: parse embedded schema: %w", err)
			return
		}
		v.compiler = jsonschema.NewCompiler()
		if err := v.compiler.AddResource(schemaURL, doc); err != nil {
			v.err = fmt.Errorf("conformance: add embedded schema: %w", err)
		}
		v.compiled = map[string]*jsonschema.Schema{}
	})
	if v.err != nil {
		return nil, v.err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[def]; ok {
		return s, nil
	}
	s, err := v.compiler.Compile(schemaURL + "#/$defs/" + def)
	if err != nil {
		return nil, fmt.Errorf("conformance: compile %s: %w", def, err)
	}
	v.compiled[def] = s
	return s, nil
}

func (v *Validator) validate(def string, doc []byte) error {
	s, err := v.schema(def)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", def, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s: %w", def, err)
	}
	return nil
}

// Response checks a response object (POST/GET /responses, or the response
// inside a response.* streaming event).
func (v *Validator) Response(doc []byte) error { return v.validate("ResponseResource", doc) }

// Compaction checks a response.compaction object (POST /responses/compact).
func (v *Validator) Compaction(doc []byte) error { return v.validate("CompactResource", doc) }

// ErrorBody checks an HTTP error body ({"error":{"message","type",…}}).
func (v *Validator) ErrorBody(doc []byte) error { return v.validate("ErrorBody", doc) }

// ErrUnknownEvent is returned for a streaming event whose type the
// specification does not define.
var ErrUnknownEvent = errors.New("not an Open Responses streaming event type")

// Event checks one streaming event against the schema of its type.
func (v *Validator) Event(doc []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("event: not JSON: %w", err)
	}
	if head.Type == "" {
		return errors.New("event: no type")
	}
	if _, err := v.schema("event:" + head.Type); err != nil {
		return fmt.Errorf("event %q: %w", head.Type, ErrUnknownEvent)
	}
	return v.validate("event:"+head.Type, doc)
}

// ValidateAgainst validates a JSON document against a JSON Schema of the
// request (a function's parameters, a structured output's schema): what a
// client checks of a call's arguments or of a json_schema answer.
func ValidateAgainst(schema, doc string) error {
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
	if err != nil {
		return fmt.Errorf("parse the schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("request.json", sdoc); err != nil {
		return fmt.Errorf("add the schema: %w", err)
	}
	sch, err := c.Compile("request.json")
	if err != nil {
		return fmt.Errorf("compile the schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
	if err != nil {
		return fmt.Errorf("%q is not JSON: %w", doc, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s does not validate: %w", doc, err)
	}
	return nil
}
