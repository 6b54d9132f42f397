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
