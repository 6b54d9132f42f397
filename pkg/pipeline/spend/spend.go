// Package spend is the arithmetic of usage accounting and budgets, in plain
// Go: what one completed turn adds to its principal's totals, how a totals
// record folds a turn in exactly once, and whether a principal's budgets
// still allow a turn. The bus adapter is pipeline.Usage.
package spend

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Record is one completed turn's spend, accounted under its principal once.
type Record struct {
	Principal string `json:"principal"`
	// TurnKey is <conversation>.<turn>: the accounting counts a key once per
	// principal, so a redelivered completion is not charged twice.
	TurnKey string             `json:"turnKey"`
	Backend string             `json:"backend,omitempty"`
	Model   string             `json:"model,omitempty"`
	At      time.Time          `json:"at"`
	Usage   contracts.LlmUsage `json:"usage"`
	Cost    contracts.Cost     `json:"cost"`
	// ReplayOf is the turn a replay re-ran: a replay calls the model again,
	// so it is a turn of its own, and its totals say how many there were.
	ReplayOf string `json:"replayOf,omitempty"`
	Kind     string `json:"kind,omitempty"`
	// KeyID is the API key the turn came in with, if any.
	KeyID string `json:"keyId,omitempty"`
}

// Counts are the summed tokens, turns and cost of some turns.
type Counts struct {
	Turns           int64 `json:"turns"`
	InputTokens     int64 `json:"input_tokens"`
	CachedTokens    int64 `json:"cached_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
	// CostNanos is the priced turns' cost in billionths of a dollar.
	CostNanos int64 `json:"cost_nanos"`
	// Unpriced counts turns whose model had no price: their tokens are in
	// the totals, their cost is not.
	Unpriced int64 `json:"unpriced_turns,omitempty"`
	Replays  int64 `json:"replays,omitempty"`
}

// Tokens is what a token budget counts: input plus output.
func (c Counts) Tokens() int64 { return c.InputTokens + c.OutputTokens }

// Add counts r.
func (c *Counts) Add(r Record) {
	c.Turns++
	c.InputTokens += int64(r.Usage.PromptTokens)
	c.CachedTokens += int64(r.Usage.CachedTokens)
	c.OutputTokens += int64(r.Usage.CompletionTokens)
	c.ReasoningTokens += int64(r.Usage.ReasoningTokens)
	if r.Cost.Unpriced {
		c.Unpriced++
	} else {
		c.CostNanos += r.Cost.Nanos()
	}
	if r.ReplayOf != "" {
		c.Replays++
	}
}

// Merge adds o.
func (c *Counts) Merge(o Counts) {
	c.Turns += o.Turns
	c.InputTokens += o.InputTokens
	c.CachedTokens += o.CachedTokens
	c.OutputTokens += o.OutputTokens
	c.ReasoningTokens += o.ReasoningTokens
	c.CostNanos += o.CostNanos
	c.Unpriced += o.Unpriced
	c.Replays += o.Replays
}

// Totals is one principal's spend in one window (a UTC day or month): what
// a budget is checked against and what the usage endpoint sums.
type Totals struct {
	Principal string `json:"principal"`
	// Window is "20261127" (a day) or "202611" (a month).
	Window string `json:"window"`
	Counts
	Models map[string]*Counts `json:"models,omitempty"`
	// Keys breaks the totals down by API key id (turns without a key are
	// not in it).
	Keys map[string]*Counts `json:"keys,omitempty"`
	// Prices are the priced turns by the price version that priced them
	// (contracts.Cost.PriceVersion). Totals folded before it was kept have none.
	Prices map[string]*Counts `json:"prices,omitempty"`
	// Seq is the accounting stream sequence of the last turn folded in.
	// Turns are folded in stream order, so a turn at or below Seq is
	// already counted: a fold redelivered after a crash adds nothing.
	Seq uint64 `json:"seq"`
	// Holds are the reservations of model calls not yet folded in, by
	// call key (hold.go): what a budget is checked against besides Counts.
	Holds map[string]Hold `json:"holds,omitempty"`
}

// Fold adds r, the turn stored at stream sequence seq, unless it is
// already counted; it reports whether it added it.
func (t *Totals) Fold(seq uint64, r Record) bool {
	if seq <= t.Seq {
		return false
	}
	t.Seq = seq
	t.Counts.Add(r)
	t.settleTurn(r.TurnKey) // the real cost replaces the turn's holds, in the same write
	if t.Models == nil {
		t.Models = map[string]*Counts{}
	}
	m := t.Models[r.Model]
	if m == nil {
		m = &Counts{}
		t.Models[r.Model] = m
	}
	m.Add(r)
	if v := r.Cost.PriceVersion; v != "" && !r.Cost.Unpriced {
		// By price version: which price list or table priced the turns
		// (the built-in list's or a profile's; `aptix usage` names them).
		if t.Prices == nil {
			t.Prices = map[string]*Counts{}
		}
		p := t.Prices[v]
		if p == nil {
			p = &Counts{}
			t.Prices[v] = p
		}
		p.Add(r)
	}
	if r.KeyID != "" {
		if t.Keys == nil {
			t.Keys = map[string]*Counts{}
		}
		k := t.Keys[r.KeyID]
		if k == nil {
			k = &Counts{}
			t.Keys[r.KeyID] = k
		}
		k.Add(r)
	}
	return true
}

// DayWindow and MonthWindow are the windows a turn at `at` is counted in.
func DayWindow(at time.Time) string   { return at.UTC().Format("20060102") }
func MonthWindow(at time.Time) string { return at.UTC().Format("200601") }

// Refusal is a budget that has no room for a call.
type Refusal struct {
	Budget contracts.Budget
	// Spent is what the window holds: USD or tokens, as the budget counts.
	Spent float64
	// Held is what other calls in flight hold, Need the refused call's
	// worst case (0 for a check with nothing to hold).
	Held, Need float64
	ResetAt    time.Time
}

// Message says what was spent and held and when the budget resets, for the client.
func (r *Refusal) Message() string {
	amount := func(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }
	if r.Budget.Tokens > 0 {
		amount = func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " tokens" }
	}
	msg := "Budget exceeded: " + amount(r.Spent) + " spent"
	if r.Held > 0 {
		msg += " and " + amount(r.Held) + " reserved by calls in flight"
	}
	msg += " of " + r.Budget.String()
	if r.Need > 0 {
		msg += "; this call may cost up to " + amount(r.Need)
	}
	return fmt.Sprintf("%s; it resets at %s.", msg, r.ResetAt.UTC().Format(time.RFC3339))
}

// Check returns the first budget whose window at now has no room left
// (spent + held ≥ budget), or nil: the check of a caller that holds
// nothing itself (the gateway, before it writes a turn). totals reads a
// window's totals (zero when there are none).
func Check(budgets []contracts.Budget, now time.Time, totals func(window string) (Totals, error)) (*Refusal, error) {
	cache := map[string]Totals{}
	for _, b := range budgets {
		window, reset := b.Window(now)
		t, ok := cache[window]
		if !ok {
			var err error
			if t, err = totals(window); err != nil {
				return nil, err
			}
			cache[window] = t
		}
		if r := t.refuse([]contracts.Budget{b}, Hold{}, now, reset); r != nil {
			return r, nil
		}
	}
	return nil, nil
}

// Windows groups budgets by the window each counts in at now, with the
// window's reset: a call is held once in each.
func Windows(budgets []contracts.Budget, now time.Time) []WindowBudgets {
	var out []WindowBudgets
	for _, b := range budgets {
		window, reset := b.Window(now)
		i := 0
		for i < len(out) && out[i].Window != window {
			i++
		}
		if i == len(out) {
			out = append(out, WindowBudgets{Window: window, Reset: reset})
		}
		out[i].Budgets = append(out[i].Budgets, b)
	}
	return out
}

// WindowBudgets are the budgets counted in one window.
type WindowBudgets struct {
	Window  string
	Reset   time.Time
	Budgets []contracts.Budget
}

// Report is the sum of some totals with its breakdowns: what
// GET /v1/aptix/usage answers.
type Report struct {
	Cost contracts.Cost `json:"cost"`
	Counts
	From        string            `json:"from,omitempty"`
	To          string            `json:"to,omitempty"`
	ByModel     map[string]Counts `json:"by_model"`
	ByDay       map[string]Counts `json:"by_day"`
	ByPrincipal map[string]Counts `json:"by_principal"`
	// ByKey is by API key id; with a model filter it is left empty (keys
	// are not broken down by model).
	ByKey map[string]Counts `json:"by_key"`
	// ByPrice is by price version (Totals.Prices); with a model filter it
	// is left empty, as ByKey is.
	ByPrice map[string]Counts `json:"by_price,omitempty"`
}

// Filter selects day totals for a report: a principal (all when All), a
// model ("" for all) and days from..to inclusive ("" for unbounded).
type Filter struct {
	Principal string
	All       bool
	Model     string
	From, To  string // YYYYMMDD
}

// Sum reports the day totals that pass f.
func Sum(days []Totals, f Filter) Report {
	r := Report{ByModel: map[string]Counts{}, ByDay: map[string]Counts{}, ByPrincipal: map[string]Counts{}, ByKey: map[string]Counts{}, ByPrice: map[string]Counts{}, From: f.From, To: f.To}
	sort.Slice(days, func(i, j int) bool { return days[i].Window < days[j].Window })
	for _, d := range days {
		if len(d.Window) != 8 || (!f.All && d.Principal != f.Principal) ||
			(f.From != "" && d.Window < f.From) || (f.To != "" && d.Window > f.To) {
			continue
		}
		var c Counts
		if f.Model == "" {
			c = d.Counts
			for m, mc := range d.Models {
				x := r.ByModel[m]
				x.Merge(*mc)
				r.ByModel[m] = x
			}
			for k, kc := range d.Keys {
				x := r.ByKey[k]
				x.Merge(*kc)
				r.ByKey[k] = x
			}
			for v, pc := range d.Prices {
				x := r.ByPrice[v]
				x.Merge(*pc)
				r.ByPrice[v] = x
			}
		} else if mc := d.Models[f.Model]; mc != nil {
			c = *mc
			r.ByModel[f.Model] = c
		} else {
			continue
		}
		r.Counts.Merge(c)
		x := r.ByDay[d.Window]
		x.Merge(c)
		r.ByDay[d.Window] = x
		y := r.ByPrincipal[d.Principal]
		y.Merge(c)
		r.ByPrincipal[d.Principal] = y
	}
	r.Cost = contracts.CostFromNanos(r.CostNanos)
	return r
}
