package spend

import (
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// A budget is a hard limit (docs/usage-and-budgets.md#the-reservation-rule):
// before each model call of a budgeted turn, the call's worst-case cost is
// held against the principal's window, next to what the window has spent,
// and the call is refused unless spent + held + its own worst case fits in
// the budget. Totals folded after the fact cannot do that alone: a burst
// passes a check of the totals all at once, before any of it is folded.
// The holds are kept in the totals record itself, so one compare-and-set
// admits a call against every other replica's holds, and the fold that
// adds a turn's real cost removes the turn's holds in the same write:
// between the two nothing is counted twice or not at all.

// HoldTTL is how long a hold outlives its last reservation or settle: a
// holder that dies for good (its turn dead-lettered) stops holding the
// budget then. A redelivered call reserves again under the same id and
// renews it.
const HoldTTL = time.Hour

// Hold is what one model call of a turn holds against a window.
type Hold struct {
	// Turn is the turn key (<conversation>.<turn>): folding the turn's
	// usage settles all its calls' holds.
	Turn string `json:"turn"`
	// Nanos is the call's worst-case cost (its real cost once settled),
	// in billionths of a dollar; Tokens its input plus output tokens.
	Nanos  int64 `json:"nanos,omitempty"`
	Tokens int64 `json:"tokens,omitempty"`
	// Unpriced: the model has no price, so USD budgets do not count it.
	Unpriced bool `json:"unpriced,omitempty"`
	// Settled: Nanos and Tokens are the call's real cost, not an estimate.
	Settled bool      `json:"settled,omitempty"`
	Expires time.Time `json:"expires"`
}

// Estimate is a call's worst case: every input token uncached at the input
// price, the whole output allowance at the dearer of the output and
// reasoning prices. A nil price is unpriced (USD budgets do not apply).
func Estimate(turnKey string, inputTokens, maxOutputTokens int, price *contracts.Price) Hold {
	h := Hold{Turn: turnKey, Tokens: int64(max(inputTokens, 0)) + int64(max(maxOutputTokens, 0))}
	if price == nil {
		h.Unpriced = true
		return h
	}
	out := price.Output
	if price.Reasoning != nil && *price.Reasoning > out {
		out = *price.Reasoning
	}
	// USD per million tokens is micro-dollars per token: ×1000 is nanos.
	h.Nanos = int64(float64(max(inputTokens, 0))*price.Input*1e3 + float64(max(maxOutputTokens, 0))*out*1e3 + 0.999)
	return h
}

// Actual is a call's real cost as a settled hold.
func Actual(turnKey string, u contracts.LlmUsage, price *contracts.Price) Hold {
	c := price.Cost(u)
	return Hold{Turn: turnKey, Nanos: c.Nanos(), Tokens: int64(max(u.PromptTokens, 0) + max(u.CompletionTokens, 0)),
		Unpriced: c.Unpriced, Settled: true}
}

// Held sums the holds not expired at now.
func (t *Totals) Held(now time.Time) (nanos, tokens int64) {
	for _, h := range t.Holds {
		if now.Before(h.Expires) {
			nanos += h.Nanos
			tokens += h.Tokens
		}
	}
	return nanos, tokens
}

// admit is the rule, the one place it is written: with nothing to add
// (need 0) a window is open while spent + held is under the limit; a call
// is admitted when spent + held + its worst case stays within it.
func admit(spent, held, need, limit int64) bool {
	if need <= 0 {
		return spent+held < limit
	}
	return spent+held+need <= limit
}

// budgetNanos is a USD budget in billionths of a dollar.
func budgetNanos(b contracts.Budget) int64 { return int64(b.USD*1e9 + 0.5) }

// refuse returns the first of budgets (all of this window) that h does
// not fit in, or nil. An unpriced h is not held to USD budgets.
func (t *Totals) refuse(budgets []contracts.Budget, h Hold, now, reset time.Time) *Refusal {
	heldNanos, heldTokens := t.Held(now)
	for _, b := range budgets {
		switch {
		case b.Tokens > 0:
			if !admit(t.Counts.Tokens(), heldTokens, h.Tokens, b.Tokens) {
				return &Refusal{Budget: b, Spent: float64(t.Counts.Tokens()), Held: float64(heldTokens), Need: float64(h.Tokens), ResetAt: reset}
			}
		case b.USD > 0 && !h.Unpriced:
			if !admit(t.CostNanos, heldNanos, h.Nanos, budgetNanos(b)) {
				return &Refusal{Budget: b, Spent: contracts.CostFromNanos(t.CostNanos).Total,
					Held: contracts.CostFromNanos(heldNanos).Total, Need: contracts.CostFromNanos(h.Nanos).Total, ResetAt: reset}
			}
		}
	}
	return nil
}

// Reserve holds h under id unless it would overrun one of budgets (the
// budgets counted in this window), which it returns. A hold already under
// id (the same call reserved again after a redelivery) is renewed, not
// added twice and not checked again: the call was admitted once. Expired
// holds are dropped. It reports whether t changed.
func (t *Totals) Reserve(id string, h Hold, budgets []contracts.Budget, now, reset time.Time) (*Refusal, bool) {
	changed := t.prune(now)
	if old, ok := t.Holds[id]; ok {
		old.Expires = now.Add(HoldTTL)
		t.Holds[id] = old
		return nil, true
	}
	if r := t.refuse(budgets, h, now, reset); r != nil {
		return r, changed
	}
	if t.Holds == nil {
		t.Holds = map[string]Hold{}
	}
	h.Expires = now.Add(HoldTTL)
	t.Holds[id] = h
	return nil, true
}

// Settle replaces the hold under id with the call's real cost, so other
// calls are admitted against what it cost rather than what it might have.
// It reports whether t changed (false: no such hold, already settled or
// folded).
func (t *Totals) Settle(id string, real Hold, now time.Time) bool {
	changed := t.prune(now)
	old, ok := t.Holds[id]
	if !ok || old.Settled {
		return changed
	}
	real.Turn, real.Settled, real.Expires = old.Turn, true, now.Add(HoldTTL)
	t.Holds[id] = real
	return true
}

// Release drops the hold under id: a call refused or cancelled before it
// was paid. It reports whether t changed.
func (t *Totals) Release(id string, now time.Time) bool {
	changed := t.prune(now)
	if _, ok := t.Holds[id]; ok {
		delete(t.Holds, id)
		return true
	}
	return changed
}

// settleTurn drops the holds of the turn whose usage is being folded in.
func (t *Totals) settleTurn(turnKey string) {
	for id, h := range t.Holds {
		if h.Turn == turnKey {
			delete(t.Holds, id)
		}
	}
}

// prune drops expired holds; it reports whether there were any.
func (t *Totals) prune(now time.Time) bool {
	n := len(t.Holds)
	for id, h := range t.Holds {
		if !now.Before(h.Expires) {
			delete(t.Holds, id)
		}
	}
	return len(t.Holds) != n
}
