package profiles

import (
	"os"
	"path/filepath"
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

// TestChatProfiles: api chat-completions with its quirks and models; the
// capabilities that need server-side state are refused, not ignored.
func TestChatProfiles(t *testing.T) {
	s, err := Parse([]byte(`{"profiles":{"ds":{"api":"chat-completions","baseUrl":"https://api.deepseek.com/v1","defaultModel":"deepseek-chat",
		"models":["deepseek-reasoner"],"headers":{"X-Title":"t"},
		"chat":{"tokenLimitField":"max_tokens","flattenText":true,"dropFields":["seed"],"extraBody":{"top_k":5}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Get("ds")
	if !p.ChatCompletions() || p.Capabilities.SupportsPreviousResponseID || p.Capabilities.Reattach || p.Chat.TokenLimitField != "max_tokens" ||
		!p.Chat.FlattenText || p.Chat.InstructionsRole != "system" || string(p.Chat.ExtraBody["top_k"]) != "5" || p.Headers["X-Title"] != "t" || p.Models[0] != "deepseek-reasoner" {
		t.Fatalf("parsed %+v", p)
	}
	if o, _ := s.Get("openai"); o.API != APIResponses {
		t.Fatalf("default api %q", o.API)
	}
	for _, bad := range []string{
		`{"profiles":{"x":{"api":"chat","baseUrl":"http://h/v1"}}}`,
		`{"profiles":{"x":{"api":"chat-completions","baseUrl":"http://h/v1","capabilities":{"reattach":true}}}}`,
		`{"profiles":{"x":{"api":"chat-completions","baseUrl":"http://h/v1","capabilities":{"supportsPreviousResponseId":true}}}}`,
		`{"profiles":{"x":{"api":"chat-completions","baseUrl":"http://h/v1","capabilities":{"compact":true}}}}`,
		`{"profiles":{"x":{"api":"chat-completions","baseUrl":"http://h/v1","chat":{"tokenLimitField":"max_output_tokens"}}}}`,
		`{"profiles":{"x":{"api":"chat-completions","baseUrl":"http://h/v1","chat":{"instructionsRole":"developer"}}}}`,
		`{"profiles":{"x":{"baseUrl":"http://h/v1","chat":{"flattenText":true}}}}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestRoute: model names route to the profile that lists them, the
// default profile first; "profile/model" names both; a model with a slash
// that is no profile's name is a model; unconfigured profiles are only
// reached by name.
func TestRoute(t *testing.T) {
	t.Setenv("APTIX_TEST_ROUTE_KEY", "")
	s := &Set{}
	s.Put(Profile{Name: "a", DefaultModel: "m1", Models: []string{"shared", "org/big"}})
	s.Put(Profile{Name: "b", DefaultModel: "m2", Models: []string{"shared"}, Aliases: map[string]string{"fast": "m2-mini"}})
	s.Put(Profile{Name: "c", DefaultModel: "m3", APIKeyEnv: "APTIX_TEST_ROUTE_KEY"})
	s.Default = "b"
	for model, want := range map[string]string{"shared": "b/shared", "m1": "a/m1", "org/big": "a/org/big", "fast": "b/m2-mini",
		"a/shared": "a/shared", "b/fast": "b/m2-mini", "a": "a/", "c/m3": "c/m3", "c": "c/"} {
		p, up, ok := s.Route(model)
		if got := p.Name + "/" + up; !ok || got != want {
			t.Errorf("%q → %q %v, want %q", model, got, ok, want)
		}
	}
	for _, model := range []string{"", "m3", "nobody/m1", "zz"} {
		if p, _, ok := s.Route(model); ok {
			t.Errorf("%q routed to %s", model, p.Name)
		}
	}
	var got []string
	for _, r := range s.Routes() {
		got = append(got, r.Profile+":"+r.Model)
	}
	if strings.Join(got, " ") != "b:m2 b:shared b:fast b:m2-mini a:m1 a:org/big" {
		t.Errorf("routes %v", got)
	}
}

// TestExampleBackends: every example profile loads, speaks Chat
// Completions, and points at no address Aptix serves itself.
func TestExampleBackends(t *testing.T) {
	s, err := Load("../../examples/backends.json")
	if err != nil {
		t.Fatal(err)
	}
	aptix := []string{":4222", ":8080", ":8090", ":8091", ":9464"}
	n := 0
	for _, name := range s.Names() {
		p, _ := s.Get(name)
		if name == "openai" || name == "sandbox" {
			continue
		}
		n++
		if !p.ChatCompletions() {
			t.Errorf("%s: api %q", name, p.API)
		}
		for _, port := range aptix {
			if strings.Contains(p.BaseURL, port+"/") {
				t.Errorf("%s: %s collides with an address Aptix serves", name, p.BaseURL)
			}
		}
	}
	if n < 9 {
		t.Fatalf("%d example profiles", n)
	}
}

// TestMaxResponseBytes: every profile has a cap on what its backend may
// answer: the default when unset, a file's value, an
// environment override; a negative one is refused.
func TestMaxResponseBytes(t *testing.T) {
	t.Setenv("APTIX_PROFILES", "")
	p, _ := Builtin().Get("sandbox")
	if p.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Fatalf("built-in sandbox cap %d, want %d", p.MaxResponseBytes, DefaultMaxResponseBytes)
	}
	s, err := Parse([]byte(`{"profiles":{"big":{"baseUrl":"u","maxResponseBytes":1048576},"plain":{"baseUrl":"u"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Get("big"); p.MaxResponseBytes != 1<<20 {
		t.Fatalf("file cap %d", p.MaxResponseBytes)
	}
	if p, _ := s.Get("plain"); p.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Fatalf("unset cap %d", p.MaxResponseBytes)
	}
	if _, err := Parse([]byte(`{"profiles":{"x":{"baseUrl":"u","maxResponseBytes":-1}}}`)); err == nil {
		t.Fatal("negative maxResponseBytes accepted")
	}
	t.Setenv("APTIX_PROFILE_SANDBOX_MAX_RESPONSE_BYTES", "4096")
	if s, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Get("sandbox"); p.MaxResponseBytes != 4096 {
		t.Fatalf("env cap %d", p.MaxResponseBytes)
	}
	t.Setenv("APTIX_PROFILE_SANDBOX_MAX_RESPONSE_BYTES", "lots")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a bad MAX_RESPONSE_BYTES accepted")
	}
}

// TestCredentials: the key from apiKeyEnv and the secret-looking headers
// (with a scheme's token alone too) are a profile's credentials; other
// headers are not.
func TestCredentials(t *testing.T) {
	t.Setenv("TEST_CRED_KEY", "sk-test-credential-1")
	p := Profile{APIKeyEnv: "TEST_CRED_KEY", Headers: map[string]string{
		"X-Api-Key": "hdr-key-2", "Proxy-Authorization": "Bearer proxy-tok-3", "X-Title": "Aptix", "HTTP-Referer": "https://example.com",
		"X-Custom": "Basic dXNlcjpwYXNz"}}
	got := strings.Join(p.Credentials(), " ")
	for _, want := range []string{"sk-test-credential-1", "hdr-key-2", "Bearer proxy-tok-3", "proxy-tok-3", "dXNlcjpwYXNz"} {
		if !strings.Contains(got, want) {
			t.Errorf("credentials %q miss %q", got, want)
		}
	}
	if strings.Contains(got, "Aptix") || strings.Contains(got, "example.com") {
		t.Errorf("credentials %q hold a header that is no secret", got)
	}
}

// TestLoadReportsEveryProblemWithItsPlace: a profiles file's errors name
// the file, the profile and the line:col, and all of them are reported
// (they named none of these and stopped at the first); a JSON syntax error
// is reported at its line:col.
func TestLoadReportsEveryProblemWithItsPlace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "backends.json")
	body := `{
  "default": "nope",
  "profiles": {
    "good": {"baseUrl": "http://h/v1"},
    "nourl": {},
    "slow": {"baseUrl": "http://h/v1", "turnTimeout": "soon"},
    "typed": {"baseUrl": "http://h/v1", "maxConcurrent": "many"},
    "extra": {"baseUrl": "http://h/v1", "apiKey": "sk-secret"}
  }
}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		file + `:2:14: default profile "nope" is not defined`,
		file + `:5:14: profile "nourl": baseUrl is required`,
		file + `:6:13: profile "slow": turnTimeout`,
		file + `:7:`, `profile "typed"`, `maxConcurrent`,
		file + `:8:14: profile "extra": json: unknown field "apiKey"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"good"`) {
		t.Errorf("a good profile reported:\n%v", err)
	}
	if err := os.WriteFile(file, []byte("{\n  \"profiles\": {\n    \"x\": {\"baseUrl\": \"u\",}\n  }\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), file+":3:") || !strings.Contains(err.Error(), "syntax") {
		t.Errorf("syntax error: %v", err)
	}
}

// TestBudgetMaxOutput: the output a budgeted turn is limited to and
// reserved for: the profile's maxOutputTokens, else 256 for a sandbox and
// 4096 for any other; out of range is refused.
func TestBudgetMaxOutput(t *testing.T) {
	s, err := Parse([]byte(`{"profiles":{"a":{"baseUrl":"http://x/v1","maxOutputTokens":1000},"b":{"baseUrl":"http://x/v1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Get("a")
	b, _ := s.Get("b")
	sb, _ := Builtin().Get("sandbox")
	if a.BudgetMaxOutput() != 1000 || b.BudgetMaxOutput() != DefaultMaxOutputTokens || sb.BudgetMaxOutput() != SandboxMaxOutputTokens {
		t.Fatalf("a %d, b %d, sandbox %d", a.BudgetMaxOutput(), b.BudgetMaxOutput(), sb.BudgetMaxOutput())
	}
	if _, err := Parse([]byte(`{"profiles":{"a":{"baseUrl":"http://x/v1","maxOutputTokens":-1}}}`)); err == nil {
		t.Fatal("a negative maxOutputTokens was accepted")
	}
}
