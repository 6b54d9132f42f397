package contracts

import (
	"encoding/json"
	"math"
)

// Price is what one model costs, in USD per million tokens. A profile's
// prices table holds one per model (or "*" for any model); the envelope
// copies the one that applies into the turn, so the completed turn says
// which price it was charged at.
type Price struct {
	Input float64 `json:"input"`
	// CachedInput is charged for the input tokens the backend served from
	// its prompt cache; nil charges them as Input.
	CachedInput *float64 `json:"cachedInput,omitempty"`
	// CacheWrite is charged for the input tokens the backend wrote to its
	// prompt cache (Anthropic's cache_creation_input_tokens, priced above
	// input); nil charges them as Input.
	CacheWrite *float64 `json:"cacheWrite,omitempty"`
	Output     float64  `json:"output"`
	// Reasoning is charged for the output tokens the model spent reasoning
	// (the Responses API counts them inside output_tokens); nil charges
	// them as Output, which is what OpenAI does.
	Reasoning *float64 `json:"reasoning,omitempty"`
	// Version names the price table it came from, so a total can be traced
	// to the prices in force when the turn ran: a profile's own table
	// ("<profile>-<hash>") or the built-in price list ("aptix-prices-<date>").
	Version string `json:"version,omitempty"`
}

// CurrencyUSD is the only currency prices are given in.
const CurrencyUSD = "USD"

// Cost is what a turn cost. A turn whose model has no price is Unpriced
// and serialises as {"unpriced":true}: it never claims to have cost 0.
type Cost struct {
	Total        float64 `json:"total"`
	Currency     string  `json:"currency,omitempty"`
	PriceVersion string  `json:"priceVersion,omitempty"`
	Unpriced     bool    `json:"unpriced,omitempty"`
}

// MarshalJSON writes an unpriced cost without a total.
func (c Cost) MarshalJSON() ([]byte, error) {
	if c.Unpriced {
		return []byte(`{"unpriced":true}`), nil
	}
	type plain Cost
	return json.Marshal(plain(c))
}

// Nanos is the total in billionths of a dollar, the unit totals are summed
// in so that adding many small turns loses nothing to float rounding.
func (c Cost) Nanos() int64 { return int64(math.Round(c.Total * 1e9)) }

// CostFromNanos is the cost of a total kept in nano-dollars.
func CostFromNanos(n int64) Cost {
	return Cost{Total: float64(n) / 1e9, Currency: CurrencyUSD}
}

// Cost prices usage: uncached input, cached input, input written to the
// cache, output other than reasoning, and reasoning, each at its rate. A nil price leaves the turn
// unpriced. Token counts a backend reports inconsistently (more cached
// than input tokens) are clamped rather than charged negative.
func (p *Price) Cost(u LlmUsage) Cost {
	if p == nil {
		return Cost{Unpriced: true}
	}
	cached := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	written := min(max(u.CacheWriteTokens, 0), max(u.PromptTokens, 0)-cached)
	reasoning := min(max(u.ReasoningTokens, 0), max(u.CompletionTokens, 0))
	cachedRate, writeRate, reasoningRate := p.Input, p.Input, p.Output
	if p.CachedInput != nil {
		cachedRate = *p.CachedInput
	}
	if p.CacheWrite != nil {
		writeRate = *p.CacheWrite
	}
	if p.Reasoning != nil {
		reasoningRate = *p.Reasoning
	}
	micro := float64(max(u.PromptTokens, 0)-cached-written)*p.Input + float64(cached)*cachedRate + float64(written)*writeRate +
		float64(max(u.CompletionTokens, 0)-reasoning)*p.Output + float64(reasoning)*reasoningRate
	// Rounded to the nano-dollar totals are kept in.
	return Cost{Total: math.Round(micro*1e3) / 1e9, Currency: CurrencyUSD, PriceVersion: p.Version}
}
