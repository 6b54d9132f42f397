package profiles

import (
	"strings"
	"testing"
)

// TestAliasRules: an alias is a model name or an object; only an object
// that asks for framing, a mode or retrieval is a rule, and a bad one is
// named with its profile and alias.
func TestAliasRules(t *testing.T) {
	s, err := Parse([]byte(`{"profiles":{"p":{"baseUrl":"http://x/v1","aliases":{
		"fast":"m-mini",
		"code-assistant":{"model":"m","framing":"agn003","mode":"ASK","retrieval":{"scope":"workspace","workspace":"main"}},
		"renamed":{"model":"m2"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Get("p")
	if p.Model("fast") != "m-mini" || p.Model("code-assistant") != "m" || p.Model("renamed") != "m2" {
		t.Errorf("models: %v", p.Aliases)
	}
	if _, ok := p.Rule("fast"); ok {
		t.Error("a plain alias has a rule")
	}
	if _, ok := p.Rule("renamed"); ok {
		t.Error("an object alias that only renames has a rule")
	}
	for _, name := range []string{"code-assistant", "p/code-assistant"} {
		r, ok := p.Rule(name)
		if !ok || r.Framing != "agn003" || r.Mode != "ASK" || r.Retrieval == nil || r.Retrieval.Workspace != "main" {
			t.Errorf("Rule(%q) = %+v, %v", name, r, ok)
		}
	}
	for _, tc := range []struct{ aliases, want string }{
		{`{"a":{"framing":"agn003"}}`, `alias "a": model is required`},
		{`{"a":{"model":"m","framing":"xml"}}`, `framing must be agn003 or none`},
		{`{"a":{"model":"m","retrieval":{"scope":"everything"}}}`, `retrieval.scope must be`},
		{`{"a":{"model":"m","color":"red"}}`, `unknown field`},
	} {
		_, err := Parse([]byte(`{"profiles":{"p":{"baseUrl":"http://x/v1","aliases":` + tc.aliases + `}}}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.aliases, err, tc.want)
		}
	}
}
