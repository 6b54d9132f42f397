package spend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func rec(model string, in, out int, usd float64) Record {
	return Record{Principal: "key:a", Model: model, Usage: contracts.LlmUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out},
		Cost: contracts.Cost{Total: usd, Currency: "USD"}}
}

func TestFoldOnce(t *testing.T) {
	var tot Totals
	steps := []struct {
		seq  uint64
		r    Record
		adds bool
	}{
		{1, rec("m1", 10, 5, 0.001), true},
		{1, rec("m1", 10, 5, 0.001), false}, // the same turn redelivered
		{2, rec("m2", 1, 1, 0.002), true},
		{2, rec("m2", 1, 1, 0.002), false},
		{1, rec("m1", 10, 5, 0.001), false}, // an older one after a newer
		{3, Record{Model: "m1", Usage: contracts.LlmUsage{PromptTokens: 4}, Cost: contracts.Cost{Unpriced: true}, ReplayOf: "t0"}, true},
	}
	for i, s := range steps {
		if got := tot.Fold(s.seq, s.r); got != s.adds {
			t.Fatalf("step %d: added %v, want %v", i, got, s.adds)
		}
	}
	want := Counts{Turns: 3, InputTokens: 15, OutputTokens: 6, CostNanos: 3_000_000, Unpriced: 1, Replays: 1}
	if tot.Counts != want {
		t.Fatalf("totals %+v, want %+v", tot.Counts, want)
	}
	if m1 := *tot.Models["m1"]; m1.Turns != 2 || m1.CostNanos != 1_000_000 {
		t.Fatalf("m1 %+v", m1)
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	day := contracts.Budget{USD: 0.01, Period: "day"}
	month := contracts.Budget{USD: 5, Period: "month"}
	tokens := contracts.Budget{Tokens: 1000, Period: "day"}
	for name, c := range map[string]struct {
		budgets []contracts.Budget
		windows map[string]Counts
		refused *contracts.Budget
		reset   time.Time
	}{
		"no budgets":         {nil, nil, nil, time.Time{}},
		"under":              {[]contracts.Budget{day}, map[string]Counts{"20261127": {CostNanos: 9_999_999}}, nil, time.Time{}},
		"reached exactly":    {[]contracts.Budget{day}, map[string]Counts{"20261127": {CostNanos: 10_000_000}}, &day, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
		"yesterday's spend":  {[]contracts.Budget{day}, map[string]Counts{"20261126": {CostNanos: 1e12}}, nil, time.Time{}},
		"month over":         {[]contracts.Budget{day, month}, map[string]Counts{"202611": {CostNanos: 5e9}}, &month, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		"tokens over":        {[]contracts.Budget{tokens}, map[string]Counts{"20261127": {InputTokens: 900, OutputTokens: 100}}, &tokens, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
		"tokens under, cost": {[]contracts.Budget{tokens}, map[string]Counts{"20261127": {InputTokens: 10, CostNanos: 1e12}}, nil, time.Time{}},
	} {
		reads := 0
		r, err := Check(c.budgets, now, func(w string) (Totals, error) { reads++; return Totals{Counts: c.windows[w]}, nil })
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.refused == nil && r != nil:
			t.Errorf("%s: refused %+v", name, r)
		case c.refused != nil && (r == nil || r.Budget != *c.refused || !r.ResetAt.Equal(c.reset)):
			t.Errorf("%s: %+v, want %v reset %s", name, r, *c.refused, c.reset)
		}
		if reads > 2 {
			t.Errorf("%s: %d reads", name, reads)
		}
	}
	boom := errors.New("kv down")
	if _, err := Check([]contracts.Budget{day}, now, func(string) (Totals, error) { return Totals{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed read must not let the turn through unchecked: %v", err)
	}
	r, _ := Check([]contracts.Budget{day}, now, func(string) (Totals, error) { return Totals{Counts: Counts{CostNanos: 12_345_000}}, nil })
	if msg := r.Message(); !strings.Contains(msg, "$0.012345 spent of $0.01/day") || !strings.Contains(msg, "2026-11-28T00:00:00Z") {
		t.Fatalf("message %q", msg)
	}
}

func keyed(r Record, id string) Record { r.KeyID = id; return r }

func TestSum(t *testing.T) {
	mk := func(p, w string, rs ...Record) Totals {
		tot := Totals{Principal: p, Window: w}
		for i, r := range rs {
			tot.Fold(uint64(i+1), r)
		}
		return tot
	}
	days := []Totals{
		mk("key:a", "20261126", rec("m1", 10, 1, 0.5)),
		mk("key:a", "20261127", keyed(rec("m1", 20, 2, 0.25), "k1"), keyed(rec("m2", 30, 3, 0.125), "k2")),
		mk("key:b", "20261127", rec("m1", 1000, 1000, 100)),
		mk("key:a", "202611", rec("m1", 1, 1, 1)), // a month record is never summed
	}
	for name, c := range map[string]struct {
		f               Filter
		turns           int64
		usd             float64
		days, prs, keys int
	}{
		"own":          {Filter{Principal: "key:a"}, 3, 0.875, 2, 1, 2},
		"own from day": {Filter{Principal: "key:a", From: "20261127"}, 2, 0.375, 1, 1, 2},
		"own to day":   {Filter{Principal: "key:a", To: "20261126"}, 1, 0.5, 1, 1, 0},
		"own model":    {Filter{Principal: "key:a", Model: "m2"}, 1, 0.125, 1, 1, 0},
		"all":          {Filter{All: true}, 4, 100.875, 2, 2, 2},
	} {
		r := Sum(append([]Totals(nil), days...), c.f)
		if r.Turns != c.turns || r.Cost.Total != c.usd || len(r.ByDay) != c.days || len(r.ByPrincipal) != c.prs || len(r.ByKey) != c.keys || r.Cost.Currency != "USD" {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

// TestByPrice: totals keep the priced turns by the price version that
// priced them, so a report says which price list or table each cost is at.
func TestByPrice(t *testing.T) {
	priced := func(r Record, version string) Record { r.Cost.PriceVersion = version; return r }
	tot := Totals{Principal: "key:a", Window: "20261127"}
	tot.Fold(1, priced(rec("gpt-4o", 10, 1, 0.5), "aptix-prices-2025-11"))
	tot.Fold(2, priced(rec("gpt-4o", 10, 1, 0.25), "aptix-prices-2025-11"))
	tot.Fold(3, priced(rec("m", 10, 1, 1), "p-1a2b"))
	tot.Fold(4, Record{Model: "x", Cost: contracts.Cost{Unpriced: true}})
	r := Sum([]Totals{tot}, Filter{All: true})
	if len(r.ByPrice) != 2 || r.ByPrice["aptix-prices-2025-11"].Turns != 2 || r.ByPrice["aptix-prices-2025-11"].CostNanos != 750_000_000 ||
		r.ByPrice["p-1a2b"].Turns != 1 {
		t.Fatalf("by price %+v", r.ByPrice)
	}
}
