package pricelist

import "testing"

func TestBuiltinParses(t *testing.T) {
	l := Builtin()
	if l.Version == "" || len(l.Models) < 10 {
		t.Fatalf("version %q, %d models", l.Version, len(l.Models))
	}
	for _, vendor := range []string{"openai", "anthropic"} {
		if l.Sources[vendor] == "" {
			t.Errorf("no source for %s", vendor)
		}
	}
	for name, e := range l.Models {
		if e.Input <= 0 || e.Output <= 0 || e.CachedInput == nil || e.CacheWrite == nil || e.Reasoning == nil {
			t.Errorf("%s: every rate must be given: %+v", name, e.Price)
		}
		if *e.CachedInput > e.Input || e.Output < e.Input {
			t.Errorf("%s: cached input above input or output below input: %+v", name, e.Price)
		}
	}
}

func TestPrice(t *testing.T) {
	l := Builtin()
	for _, c := range []struct {
		model string
		as    string // the entry it is priced as; "" for unpriced
	}{
		{"gpt-5.1", "gpt-5.1"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"openai/gpt-4.1-mini", "gpt-4.1-mini"},
		{"sandbox-1", ""},
		{"llama-3.1-70b", ""},
		{"gpt-4o-mini-extra", ""},
	} {
		p, ok := l.Price(c.model)
		if c.as == "" {
			if ok {
				t.Errorf("%s: priced %+v, want unpriced", c.model, p)
			}
			continue
		}
		want := l.Models[c.as].Price
		want.Version = l.Version
		if !ok || p.Input != want.Input || p.Output != want.Output || p.Version != l.Version {
			t.Errorf("%s: %+v %v, want %s's %+v", c.model, p, ok, c.as, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"no version":       `{"taken":"2025-11","sources":{"x":"y"},"models":{}}`,
		"no date":          `{"version":"v","sources":{"x":"y"},"models":{}}`,
		"vendor no source": `{"version":"v","taken":"d","sources":{},"models":{"m":{"vendor":"x","input":1,"output":1}}}`,
		"negative":         `{"version":"v","taken":"d","sources":{"x":"y"},"models":{"m":{"vendor":"x","input":-1,"output":1}}}`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestSource(t *testing.T) {
	for version, want := range map[string]string{
		"":                "",
		Builtin().Version: "built-in price list " + Builtin().Version + " (figures of " + Builtin().Taken + ")",
		"openai-1a2b3c4d": "profile prices openai-1a2b3c4d",
	} {
		if got := Source(version); got != want {
			t.Errorf("Source(%q) = %q, want %q", version, got, want)
		}
	}
}
