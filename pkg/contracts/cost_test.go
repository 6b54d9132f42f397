package contracts

import (
	"encoding/json"
	"testing"
	"time"
)

func f(v float64) *float64 { return &v }

func TestPriceCost(t *testing.T) {
	full := &Price{Input: 1.25, CachedInput: f(0.125), Output: 10, Reasoning: f(20), Version: "v1"}
	for name, c := range map[string]struct {
		p    *Price
		u    LlmUsage
		want Cost
	}{
		"unpriced":         {nil, LlmUsage{PromptTokens: 1000}, Cost{Unpriced: true}},
		"input and output": {&Price{Input: 2, Output: 8}, LlmUsage{PromptTokens: 1_000_000, CompletionTokens: 500_000}, Cost{Total: 6, Currency: "USD"}},
		"cached and reasoning at their rates": {full, LlmUsage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 300, ReasoningTokens: 100},
			// 600×1.25 + 400×0.125 + 200×10 + 100×20 = 750+50+2000+2000 = 4800 µ$ per million → 0.0048
			Cost{Total: 0.0048, Currency: "USD", PriceVersion: "v1"}},
		"unset rates fall back": {&Price{Input: 1, Output: 4}, LlmUsage{PromptTokens: 1000, CachedTokens: 1000, CompletionTokens: 10, ReasoningTokens: 10},
			Cost{Total: 0.00104, Currency: "USD"}},
		"cache reads and writes at their rates": {&Price{Input: 3, CachedInput: f(0.3), CacheWrite: f(3.75), Output: 15},
			LlmUsage{PromptTokens: 1000, CachedTokens: 600, CacheWriteTokens: 300, CompletionTokens: 100},
			// 100×3 + 600×0.3 + 300×3.75 + 100×15 = 300+180+1125+1500 = 3105 µ$ → 0.003105
			Cost{Total: 0.003105, Currency: "USD"}},
		"cache writes without a rate are input": {&Price{Input: 1, Output: 1}, LlmUsage{PromptTokens: 1000, CacheWriteTokens: 400},
			Cost{Total: 0.001, Currency: "USD"}},
		"zero price is a priced zero": {&Price{}, LlmUsage{PromptTokens: 5, CompletionTokens: 5}, Cost{Total: 0, Currency: "USD"}},
		"inconsistent counts clamped": {&Price{Input: 1, CachedInput: f(0), Output: 1, Reasoning: f(0)},
			LlmUsage{PromptTokens: 10, CachedTokens: 50, CompletionTokens: 10, ReasoningTokens: 50}, Cost{Total: 0, Currency: "USD"}},
		"tiny turn keeps nano-dollars": {&Price{Input: 0.05, Output: 0.4}, LlmUsage{PromptTokens: 7, CompletionTokens: 3},
			Cost{Total: 0.00000155, Currency: "USD"}},
	} {
		if got := c.p.Cost(c.u); got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestCostJSON(t *testing.T) {
	b, _ := json.Marshal(Cost{Unpriced: true})
	if string(b) != `{"unpriced":true}` {
		t.Fatalf("unpriced: %s", b)
	}
	b, _ = json.Marshal(Cost{Total: 0.5, Currency: "USD", PriceVersion: "p"})
	if string(b) != `{"total":0.5,"currency":"USD","priceVersion":"p"}` {
		t.Fatalf("priced: %s", b)
	}
	if got := CostFromNanos(Cost{Total: 0.00000155}.Nanos()).Total; got != 0.00000155 {
		t.Fatalf("nanos round trip: %v", got)
	}
}

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]struct {
		tokens bool
		b      Budget
		bad    bool
	}{
		"0.10/day":   {b: Budget{USD: 0.10, Period: "day"}},
		"$5/month":   {b: Budget{USD: 5, Period: "month"}},
		" 1 / Day ":  {b: Budget{USD: 1, Period: "day"}},
		"100000/day": {tokens: true, b: Budget{Tokens: 100000, Period: "day"}},
		"0.5/day ":   {tokens: true, bad: true},
		"5":          {bad: true},
		"5/week":     {bad: true},
		"-1/day":     {bad: true},
		"0/day":      {bad: true},
		"NaN/day":    {bad: true},
		"abc/month":  {bad: true},
	} {
		got, err := ParseBudget(in, want.tokens)
		if (err != nil) != want.bad || (!want.bad && got != want.b) {
			t.Errorf("%q: %+v %v, want %+v bad=%v", in, got, err, want.b, want.bad)
		}
	}
}

func TestBudgetWindow(t *testing.T) {
	now := time.Date(2026, 12, 31, 23, 59, 0, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		b     Budget
		key   string
		reset time.Time
	}{
		{Budget{Period: "day"}, "20261231", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Budget{Period: "month"}, "202612", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		key, reset := c.b.Window(now)
		if key != c.key || !reset.Equal(c.reset) {
			t.Errorf("%s: %s %s, want %s %s", c.b.Period, key, reset, c.key, c.reset)
		}
	}
}
