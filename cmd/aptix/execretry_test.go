package main

import (
	"strings"
	"testing"
)

// TestUpExecTurnRetry: `aptix exec --turn T` re-sent (a retry after a lost
// answer) prints the turn's stored answer, the same response, and runs
// nothing again: a turn id alone names the turn's conversation. Before,
// each send started a new conversation and ran the turn again.
func TestUpExecTurnRetry(t *testing.T) {
	startUp(t)
	f := execFlags{turn: "t-retry-1", asJSON: true}
	first, errOut, err := execTurn(t, f, "Answer once")
	if err != nil || !strings.Contains(first, `"responseContinuationId"`) {
		t.Fatalf("first: %v %q", err, first)
	}
	if !strings.Contains(errOut, "conversation c-t-retry-1, turn t-retry-1 sent") {
		t.Errorf("the turn's conversation: %q", errOut)
	}
	again, _, err := execTurn(t, f, "Answer once")
	if err != nil || again != first {
		t.Fatalf("re-sent: %v\n%s\nwant the stored answer\n%s", err, again, first)
	}
	// Another question under the same turn id is refused, not answered with the old one.
	if out, _, err := execTurn(t, f, "Another question"); err == nil || !strings.Contains(err.Error(), "turn_id_reused") {
		t.Fatalf("a reused turn id: %v %q", err, out)
	}
}
