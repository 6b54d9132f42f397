package sandbox_test

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestOpenResponsesConformance runs the Open Responses conformance suite
// (the intent of the public HTTP compliance tests, every body and stream
// event schema-validated) against the sandbox, with its deterministic
// replies checked too.
func TestOpenResponsesConformance(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	conformance.Run(t, ts.URL+"/v1", "sandbox-1", conformance.Options{Deterministic: true})
}
