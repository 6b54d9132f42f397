package responses

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestBudgetFailure: a turn the LLM caller refused for a spent budget (one
// that passed this gateway's check while another replica spent the
// budget) answers like the gateway's own refusal: 429 insufficient_quota.
func TestBudgetFailure(t *testing.T) {
	e := Failure(&contracts.Turn{Failure: &contracts.Failure{Stage: "llmcaller", Code: "budget_exceeded", Message: "Budget exceeded: … resets at …"}})
	if e == nil || e.Status != 429 || e.Type != "insufficient_quota" || e.Code == nil || *e.Code != "budget_exceeded" {
		t.Fatalf("%+v", e)
	}
}
