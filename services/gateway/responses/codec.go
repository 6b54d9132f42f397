package responses

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Semantics is the pipeline's codec (pkg/pipeline/internal/turncodec, and
// the gateway's writeJSON): the v2 engine with encoding/json's semantics,
// the same values and bytes for about half the CPU.
var v1Semantics = jsonv1.DefaultOptionsV1()

// decodeBody decodes what the gateway reads on every response it builds
// (the upstream body of a completed turn, the echoed request parameters) as
// encoding/json would. A variable so a test can compare it with
// encoding/json's decode.
var decodeBody = func(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1Semantics) }

// encodeJSON encodes v as encoding/json's Marshal would.
func encodeJSON(v any) ([]byte, error) { return jsonv2.Marshal(v, v1Semantics) }

// encodeEcho encodes a response record's echoed parameters (a variable so a
// test can compare it with encoding/json's).
var encodeEcho = encodeJSON

// decodeRequest decodes a create request's body and parameters as
// encoding/json would (a variable so a test can compare it with
// encoding/json's decode). Parse asks encoding/json again for the error of a
// body that is not JSON, which names the position.
var decodeRequest = func(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1Semantics) }
