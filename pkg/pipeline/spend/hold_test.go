package spend

import (
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

var price20 = &contracts.Price{Input: 20, Output: 20}

func TestEstimate(t *testing.T) {
	reasoning := 60.0
	h := Estimate("c.t", 1000, 500, &contracts.Price{Input: 2, Output: 8, Reasoning: &reasoning})
	// 1000 × $2/M + 500 × $60/M (reasoning is dearer than output) = $0.032
	if h.Nanos != 32_000_000 || h.Tokens != 1500 || h.Unpriced || h.Turn != "c.t" {
		t.Fatalf("estimate %+v", h)
	}
	if u := Estimate("c.t", 1000, 500, nil); !u.Unpriced || u.Nanos != 0 || u.Tokens != 1500 {
		t.Fatalf("unpriced estimate %+v", u)
	}
}

// TestReserveBurst is a burst on one record: 32 calls of a
// $0.0012 worst case against $0.01 are admitted 8 at a time, whatever
// their order, and a settled call leaves room for its unused allowance.
func TestReserveBurst(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	day := contracts.Budget{USD: 0.01, Period: "day"}
	window, reset := day.Window(now)
	tot := Totals{Window: window}
	admitted := 0
	for i := range 32 {
		h := Estimate("c.t"+string(rune('a'+i)), 40, 20, price20) // 60 tokens × $20/M = $0.0012
		if r, _ := tot.Reserve("c.t"+string(rune('a'+i)), h, []contracts.Budget{day}, now, reset); r == nil {
			admitted++
		} else if !strings.Contains(r.Message(), "reserved by calls in flight") || r.Need != 0.0012 {
			t.Fatalf("refusal %q %+v", r.Message(), r)
		}
	}
	if admitted != 8 {
		t.Fatalf("admitted %d of 32, want 8 ($0.0096 of $0.01)", admitted)
	}
	nanos, _ := tot.Held(now)
	if nanos > budgetNanos(day) {
		t.Fatalf("held %d nanos over the budget", nanos)
	}
	// Settled to its real cost (10 tokens), a call frees the rest of its allowance.
	if !tot.Settle("c.ta", Actual("", contracts.LlmUsage{PromptTokens: 5, CompletionTokens: 5}, price20), now) {
		t.Fatal("settle changed nothing")
	}
	if h := tot.Holds["c.ta"]; h.Nanos != 200_000 || !h.Settled || h.Turn != "c.ta" {
		t.Fatalf("settled hold %+v", h)
	}
	if r, _ := tot.Reserve("c.tz", Estimate("c.tz", 40, 20, price20), []contracts.Budget{day}, now, reset); r != nil {
		t.Fatalf("refused after a settle freed $0.001: %s", r.Message())
	}
	// Folding the turn's usage settles its hold into the spend, once.
	tot.Fold(1, Record{TurnKey: "c.ta", Cost: contracts.Cost{Total: 0.0002}})
	if _, ok := tot.Holds["c.ta"]; ok || tot.CostNanos != 200_000 {
		t.Fatalf("fold left the hold or missed the cost: %+v", tot)
	}
	after, _ := tot.Held(now)
	if after+tot.CostNanos > budgetNanos(day) {
		t.Fatalf("spent %d + held %d over the budget", tot.CostNanos, after)
	}
}

func TestReserveIdempotentReleaseExpiry(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	tokens := contracts.Budget{Tokens: 100, Period: "day"}
	window, reset := tokens.Window(now)
	tot := Totals{Window: window}
	h := Estimate("c.t", 40, 20, nil) // unpriced: still held to a token budget
	if r, _ := tot.Reserve("c.t", h, []contracts.Budget{tokens}, now, reset); r != nil {
		t.Fatal(r.Message())
	}
	// The same call reserved again (a redelivery) is not held twice.
	if r, _ := tot.Reserve("c.t", h, []contracts.Budget{tokens}, now, reset); r != nil {
		t.Fatal(r.Message())
	}
	if _, held := tot.Held(now); held != 60 {
		t.Fatalf("held %d tokens, want 60", held)
	}
	if r, _ := tot.Reserve("c.u", Estimate("c.u", 40, 20, nil), []contracts.Budget{tokens}, now, reset); r == nil || r.Budget != tokens {
		t.Fatalf("60 + 60 tokens admitted against 100: %+v", r)
	}
	if !tot.Release("c.t", now) || tot.Release("c.t", now) {
		t.Fatal("release is not once")
	}
	if r, _ := tot.Reserve("c.u", Estimate("c.u", 40, 20, nil), []contracts.Budget{tokens}, now, reset); r != nil {
		t.Fatalf("refused after the release: %s", r.Message())
	}
	// A dead holder's hold expires.
	later := now.Add(HoldTTL)
	if _, held := tot.Held(later); held != 0 {
		t.Fatalf("held %d tokens after the TTL", held)
	}
	// An unpriced call is not held to a USD budget.
	usd := contracts.Budget{USD: 0.000001, Period: "day"}
	if r, _ := tot.Reserve("c.v", Estimate("c.v", 1e6, 1e6, nil), []contracts.Budget{usd}, later, reset); r != nil {
		t.Fatalf("unpriced call refused by a USD budget: %s", r.Message())
	}
}
