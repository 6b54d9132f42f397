package profiles

import (
	"strings"
	"testing"
	"time"
)

func TestBuiltinDefaultFollowsAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	if d := Builtin().Default; d != "sandbox" {
		t.Fatalf("default without key = %q, want sandbox", d)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	s := Builtin()
	if s.Default != "openai" {
		t.Fatalf("default with key = %q, want openai", s.Default)
	}
	p, _ := s.Get("")
	if p.APIKey() != "sk-test" || p.Capabilities.RetainsTools {
		t.Fatalf("openai profile: key %q retainsTools %v", p.APIKey(), p.Capabilities.RetainsTools)
	}
}

func TestParseFile(t *testing.T) {
	s, err := Parse([]byte(`{"default":"local","profiles":{"local":{
		"baseUrl":"http://localhost:11434/v1/","defaultModel":"llama3","aliases":{"fast":"llama3:8b"},
		"attemptTimeout":"5s","maxRetries":0,
		"capabilities":{"supportsPreviousResponseId":false,"toolMode":"prompt","retainsTools":true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Get("")
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseURL != "http://localhost:11434/v1" || p.AttemptTimeout != 5*time.Second || p.TurnTimeout != DefaultTurnTimeout ||
		p.MaxRetries != 0 || p.MaxConcurrent != DefaultMaxConcurrent || p.Capabilities.SupportsPreviousResponseID ||
		p.Capabilities.ToolMode != ToolModePrompt || !p.Capabilities.RetainsTools {
		t.Fatalf("parsed %+v", p)
	}
	if p.Model("fast") != "llama3:8b" || p.Model("") != "llama3" || p.Model("other") != "other" {
		t.Fatal("model resolution")
	}
	if _, err := s.Get("openai"); err != nil {
		t.Fatal("built-ins must stay available:", err)
	}
}

func TestParseErrors(t *testing.T) {
	for name, in := range map[string]string{
		"bad json":      `{`,
		"unknown field": `{"profiles":{"x":{"baseUrl":"u","apiKey":"sk-secret"}}}`,
		"no base url":   `{"profiles":{"x":{}}}`,
		"bad tool mode": `{"profiles":{"x":{"baseUrl":"u","capabilities":{"toolMode":"magic"}}}}`,
		"bad duration":  `{"profiles":{"x":{"baseUrl":"u","turnTimeout":"soon"}}}`,
		"bad default":   `{"default":"nope"}`,
		"bad name":      `{"profiles":{"X Y":{"baseUrl":"u"}}}`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("APTIX_PROFILES", "")
	t.Setenv("APTIX_BACKEND", "openai")
	t.Setenv("APTIX_PROFILE_SANDBOX_BASE_URL", "http://127.0.0.1:9999/v1")
	t.Setenv("APTIX_PROFILE_SANDBOX_MAX_CONCURRENT", "3")
	s, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.Default != "openai" {
		t.Fatal(s.Default)
	}
	p, _ := s.Get("sandbox")
	if p.BaseURL != "http://127.0.0.1:9999/v1" || p.MaxConcurrent != 3 {
		t.Fatalf("%+v", p)
	}
	_, err = s.Get("nope")
	if err == nil || !strings.Contains(err.Error(), "known: openai, sandbox") {
		t.Fatal(err)
	}
}

// Reattach (background responses kept upstream) is on for the sandbox only,
// unless a profiles file says so: it stores responses and OpenAI keeps them
// about 10 minutes, so it is a choice, not a default.
func TestReattachCapability(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	s := Builtin()
	sb, _ := s.Get("sandbox")
	oa, _ := s.Get("openai")
	if !sb.Capabilities.Reattach || oa.Capabilities.Reattach {
		t.Fatalf("reattach: sandbox %v, openai %v", sb.Capabilities.Reattach, oa.Capabilities.Reattach)
	}
	f, err := Parse([]byte(`{"profiles":{"on":{"baseUrl":"u","capabilities":{"reattach":true}},"off":{"baseUrl":"u"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	on, _ := f.Get("on")
	off, _ := f.Get("off")
	if !on.Capabilities.Reattach || off.Capabilities.Reattach {
		t.Fatalf("file: on %v, off %v", on.Capabilities.Reattach, off.Capabilities.Reattach)
	}
}
