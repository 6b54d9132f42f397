// Package turncodec encodes and decodes the Turn document the way every stage
// and reader of the pipeline does.
package turncodec

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// The Turn document is decoded once and encoded once per stage, and by the
// time it reaches the mapper it carries the context block, the /responses body
// and the upstream body (25 KB with 8 chunks). The benchmark's profile showed
// encoding/json's double scan of those embedded raw bodies as the largest
// cost of a stage, so turns go through the v2 engine (the code of Go's
// encoding/json/v2) with v1 semantics: same field names, same omitempty, same
// output, about half the CPU (BenchmarkTurnCodec).
var options = jsonv1.DefaultOptionsV1()

// Marshal encodes a turn as encoding/json would.
func Marshal(t *contracts.Turn) ([]byte, error) { return jsonv2.Marshal(t, options) }

// Unmarshal decodes a turn as encoding/json would.
func Unmarshal(data []byte, t *contracts.Turn) error {
	return jsonv2.Unmarshal(data, t, options)
}
