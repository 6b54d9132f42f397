// Package pricelist is Aptix's built-in, dated price list of common OpenAI
// and Anthropic models (prices.json, embedded): what a turn is charged at
// when its backend profile names no price of its own, so a deployment
// that configures nothing still sees what its turns cost. The list is a
// snapshot of the vendors' public pricing pages at a date it states; a
// profile's own "prices" table overrides it (docs/backends.md#the-price-list).
package pricelist

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

//go:embed prices.json
var data []byte

// List is the price list as the file holds it.
type List struct {
	// Version names the list in every price taken from it
	// (contracts.Price.Version), so a turn's cost says it came from here.
	Version string `json:"version"`
	// Taken is when the figures were read from the vendors' pages.
	Taken   string            `json:"taken"`
	Note    string            `json:"note"`
	Sources map[string]string `json:"sources"`
	Models  map[string]Entry  `json:"models"`
}

// Entry is one model's price and whose model it is.
type Entry struct {
	Vendor string `json:"vendor"`
	contracts.Price
}

var builtin = mustParse(data)

func mustParse(b []byte) List {
	l, err := Parse(b)
	if err != nil {
		panic(err) // the embedded file is tested: a broken one never ships
	}
	return l
}

// Parse reads a price list and checks it: a version, a date, a source for
// every vendor named, and non-negative rates.
func Parse(b []byte) (List, error) {
	var l List
	if err := json.Unmarshal(b, &l); err != nil {
		return List{}, fmt.Errorf("price list: %w", err)
	}
	if l.Version == "" || l.Taken == "" {
		return List{}, fmt.Errorf("price list: version and taken (the date the figures were read) are required")
	}
	for name, e := range l.Models {
		if _, ok := l.Sources[e.Vendor]; !ok {
			return List{}, fmt.Errorf("price list: model %q: vendor %q has no source", name, e.Vendor)
		}
		for _, v := range []*float64{&e.Input, e.CachedInput, e.CacheWrite, &e.Output, e.Reasoning} {
			if v != nil && *v < 0 {
				return List{}, fmt.Errorf("price list: model %q: a negative rate", name)
			}
		}
	}
	return l, nil
}

// Builtin is the embedded list.
func Builtin() List { return builtin }

// snapshot matches the suffix naming a dated snapshot of a model or its
// moving alias: -2024-08-06, -20250929, -latest.
var snapshot = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Price is model's price in the list, with the list's version: the model
// by its own name, else by the name without a snapshot suffix
// ("gpt-4o-2024-08-06" is priced as "gpt-4o", "claude-sonnet-4-5-20250929"
// as "claude-sonnet-4-5"). A vendor prefix ("openai/gpt-4o",
// "anthropic/claude-…", as routers name models) is ignored.
func (l List) Price(model string) (*contracts.Price, bool) {
	if _, m, ok := strings.Cut(model, "/"); ok {
		model = m
	}
	e, ok := l.Models[model]
	if !ok {
		e, ok = l.Models[snapshot.ReplaceAllString(model, "")]
	}
	if !ok {
		return nil, false
	}
	p := e.Price
	p.Version = l.Version
	return &p, true
}

// Source says which prices a cost's price version (contracts.Cost.PriceVersion)
// names, for the console and `aptix usage`: this list, with the date its
// figures were taken, or a profile's own prices table.
func Source(version string) string {
	switch version {
	case "":
		return ""
	case builtin.Version:
		return "built-in price list " + version + " (figures of " + builtin.Taken + ")"
	}
	return "profile prices " + version
}
