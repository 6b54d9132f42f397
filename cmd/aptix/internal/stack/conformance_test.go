package stack

import (
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
