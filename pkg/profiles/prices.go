package profiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles/pricelist"
)

// Prices are a profile's prices by model name; "*" prices any other model.
type Prices map[string]contracts.Price

// ParsePrices reads a prices table as JSON, e.g.
// {"*":{"input":1.25,"cachedInput":0.125,"output":10}}; "cacheWrite" and
// "reasoning" are optional.
func ParsePrices(s string) (Prices, error) {
	var p Prices
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("prices: want {\"MODEL or *\":{\"input\":…,\"cachedInput\":…,\"cacheWrite\":…,\"output\":…,\"reasoning\":…}}: %w", err)
	}
	return p, p.check()
}

func (ps Prices) check() error {
	for model, p := range ps {
		for name, v := range map[string]*float64{"input": &p.Input, "cachedInput": p.CachedInput, "cacheWrite": p.CacheWrite, "output": &p.Output, "reasoning": p.Reasoning} {
			if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return fmt.Errorf("prices[%q].%s must be a non-negative number of USD per million tokens", model, name)
			}
		}
	}
	return nil
}

// Price is the price of model on this profile: its own entry, else "*",
// else the built-in price list's (pricelist: common OpenAI and Anthropic
// models, dated, its version naming it), else nil (unpriced). So a
// deployment that configures no price still sees what its turns cost,
// and a profile's own table overrides the list wherever it says
// otherwise. Without a version of its own a profile's price is named by
// the profile and a hash of its rates, so a changed price gets a new name.
func (p Profile) Price(model string) *contracts.Price {
	pr, ok := p.Prices[model]
	if !ok {
		if pr, ok = p.Prices["*"]; !ok {
			listed, _ := pricelist.Builtin().Price(model)
			return listed
		}
	}
	if pr.Version == "" {
		b, _ := json.Marshal(pr)
		h := sha256.Sum256(b)
		pr.Version = p.Name + "-" + hex.EncodeToString(h[:4])
	}
	return &pr
}
