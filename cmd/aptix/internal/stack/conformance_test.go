package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestGatewayOpenResponsesConformance runs the Open Responses compliance
// intents (pkg/conformance: basic response, system prompt, streaming, tool
// calling, image input, multi-turn, assistant phase, compaction, compaction
// without model, …) against the gateway over the whole pipeline, validating
// every body and stream event against the Open Responses schema; the same
// suite runs against the sandbox directly in its own tests.
func TestGatewayOpenResponsesConformance(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway(func(c *httpapi.Config) { c.MaxBodyBytes = 8 << 20 })
	conformance.Run(t, url+"/v1", "sandbox-1", conformance.Options{Deterministic: true})
}

// TestGatewayEchoesToolsBySchema: a function tool sent without a
// description is echoed with description null, as the Open Responses
// schema requires, not without the field.
func TestGatewayEchoesToolsBySchema(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	code, body := postJSON(t, url+"/v1/responses", `{"model":"sandbox-1","input":"hi","tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}}}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var v conformance.Validator
	if err := v.Response([]byte(body)); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
}

// TestGatewayStructuredOutputs: text.format json_schema reaches the model
// through the pipeline, and the answer (the sandbox builds it from the
// schema and the request) validates against the schema.
func TestGatewayStructuredOutputs(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	const schema = `{"type":"object","properties":{"city":{"type":"string","description":"the city"},"nights":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string","enum":["food","art"]}}},"required":["city","nights","tags"],"additionalProperties":false}`
	code, body := postJSON(t, url+"/v1/responses", `{"model":"sandbox-1","input":"Plan 3 nights in Porto.","text":{"format":{"type":"json_schema","name":"trip","strict":true,"schema":`+schema+`}}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r struct {
		Output []struct {
			Content []struct{ Text string }
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Output) == 0 || len(r.Output[0].Content) == 0 {
		t.Fatalf("%v %s", err, body)
	}
	got := r.Output[0].Content[0].Text
	if err := conformance.ValidateAgainst(schema, got); err != nil || !strings.Contains(got, `"city":"Porto"`) || !strings.Contains(got, `"nights":3`) {
		t.Fatalf("answer %s: %v", got, err)
	}
}
