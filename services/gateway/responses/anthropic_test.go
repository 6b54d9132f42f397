package responses

import (
	"strings"
	"testing"
)

// TestAnthropicDropped: what an anthropic-messages backend does not get is named.
func TestAnthropicDropped(t *testing.T) {
	for _, c := range []struct {
		body string
		cw   int
		want string
	}{
		{`{"model":"m","input":"x","temperature":0.2,"text":{"format":{"type":"text"}}}`, 0, ""},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_object"},"verbosity":"low"},"prompt_cache_key":"k","service_tier":"flex"}`, 0,
			"prompt_cache_key service_tier text.format text.verbosity"},
		{`{"model":"m","input":"x","reasoning":{"effort":"low","summary":"auto"},"truncation":"auto","include":["reasoning.encrypted_content"]}`, 0,
			"include reasoning.summary truncation"},
		{`{"model":"m","input":"x","truncation":"auto"}`, 1000, ""},
	} {
		r, e := Parse([]byte(c.body))
		if e != nil {
			t.Fatal(e)
		}
		if got := strings.Join(r.AnthropicDropped(c.cw), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
}
