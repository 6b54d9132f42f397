// Package schema generates the JSON Schemas of the client-facing events from
// the Go types, so a client in any language can publish a valid execute event
// and read a completion without reading Go. The generated files are committed
// next to this file; TestSchemasMatchTypes fails when they drift.
package schema

//go:generate go run ./gen

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Files maps each committed schema file name to the value it describes.
var Files = map[string]any{
	"agent-execute-request.schema.json":  contracts.AgentExecuteRequest{},
	"agent-execute-response.schema.json": contracts.AgentExecuteResponse{},
	"turn.schema.json":                   contracts.Turn{},
}

// Generate returns the schema document for v, indented and newline-terminated.
func Generate(v any) ([]byte, error) {
	r := &jsonschema.Reflector{
		// Fields without omitempty are required, as the Go encoder always writes them.
		RequiredFromJSONSchemaTags: false,
		DoNotReference:             false,
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID("https://aptix.dev/schema/" + reflect.TypeOf(v).Name())
	s.Title = reflect.TypeOf(v).Name()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal schema of %T: %w", v, err)
	}
	return append(b, '\n'), nil
}
