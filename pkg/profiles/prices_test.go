package profiles

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles/pricelist"
)

func TestPrice(t *testing.T) {
	set, err := Parse([]byte(`{"profiles":{"p":{"baseUrl":"http://x/v1","prices":{
		"gpt-5.1":{"input":1.25,"cachedInput":0.125,"output":10,"version":"2026-11"},
		"*":{"input":1,"output":2}}},
		"free":{"baseUrl":"http://y/v1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("p")
	for model, want := range map[string]struct {
		input   float64
		version string
	}{
		"gpt-5.1": {1.25, "2026-11"},
		"other":   {1, ""},
	} {
		pr := p.Price(model)
		if pr == nil || pr.Input != want.input || (want.version != "" && pr.Version != want.version) || pr.Version == "" {
			t.Errorf("%s: %+v, want input %v version %q", model, pr, want.input, want.version)
		}
	}
	if free, _ := set.Get("free"); free.Price("any") != nil {
		t.Error("a profile without prices priced a model")
	}
	if sb, _ := set.Get("sandbox"); sb.Price("sandbox-1") == nil || sb.Price("sandbox-1").Input != 0 {
		t.Error("the sandbox should be priced at zero")
	}
	a, b := (Profile{Name: "x", Prices: Prices{"*": {Input: 1}}}).Price("m"), (Profile{Name: "x", Prices: Prices{"*": {Input: 2}}}).Price("m")
	if a.Version == b.Version {
		t.Errorf("different prices share a version %q", a.Version)
	}
}

func TestPricesRejected(t *testing.T) {
	for _, body := range []string{
		`{"profiles":{"p":{"baseUrl":"http://x/v1","prices":{"*":{"input":-1}}}}}`,
		`{"profiles":{"p":{"baseUrl":"http://x/v1","prices":{"*":{"inptu":1}}}}}`,
	} {
		if _, err := Parse([]byte(body)); err == nil {
			t.Errorf("accepted %s", body)
		}
	}
}

func TestPricesFromEnv(t *testing.T) {
	t.Setenv("APTIX_PROFILES", "")
	t.Setenv("APTIX_PROFILE_SANDBOX_PRICES", `{"*":{"input":1000,"output":1000}}`)
	set, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := set.Get("sandbox")
	if pr := sb.Price("sandbox-1"); pr == nil || pr.Input != 1000 {
		t.Fatalf("%+v", pr)
	}
	t.Setenv("APTIX_PROFILE_SANDBOX_PRICES", `{"*":{"input":"x"}}`)
	if _, err := FromEnv(); err == nil {
		t.Fatal("a bad price was accepted")
	}
}

// TestPriceFromList: a profile naming no price for a model the built-in
// list knows charges the list's price, named by the list's version; its
// own entry or "*" overrides the list.
func TestPriceFromList(t *testing.T) {
	list := pricelist.Builtin()
	listed, _ := list.Price("gpt-4o")
	for name, c := range map[string]struct {
		prof        Profile
		model       string
		input       float64
		fromList    bool
		wantNoPrice bool
	}{
		"no prices: the list":          {Profile{Name: "openai"}, "gpt-4o", listed.Input, true, false},
		"dated snapshot: the list":     {Profile{Name: "openai"}, "gpt-4o-2024-08-06", listed.Input, true, false},
		"own entry overrides":          {Profile{Name: "p", Prices: Prices{"gpt-4o": {Input: 9}}}, "gpt-4o", 9, false, false},
		"own star overrides":           {Profile{Name: "p", Prices: Prices{"*": {Input: 7}}}, "gpt-4o", 7, false, false},
		"other entries: list for it":   {Profile{Name: "p", Prices: Prices{"gpt-5": {Input: 9}}}, "gpt-4o", listed.Input, true, false},
		"unknown model stays unpriced": {Profile{Name: "p"}, "llama-3.1-70b", 0, false, true},
	} {
		pr := c.prof.Price(c.model)
		if c.wantNoPrice {
			if pr != nil {
				t.Errorf("%s: priced %+v", name, pr)
			}
			continue
		}
		if pr == nil || pr.Input != c.input || (pr.Version == list.Version) != c.fromList {
			t.Errorf("%s: %+v, want input %v from the list %v (%s)", name, pr, c.input, c.fromList, list.Version)
		}
	}
}

func TestCacheWritePrice(t *testing.T) {
	p, err := ParsePrices(`{"*":{"input":3,"cachedInput":0.3,"cacheWrite":3.75,"output":15}}`)
	if err != nil || p["*"].CacheWrite == nil || *p["*"].CacheWrite != 3.75 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := ParsePrices(`{"*":{"input":3,"cacheWrite":-1,"output":15}}`); err == nil {
		t.Fatal("a negative cacheWrite was accepted")
	}
}
