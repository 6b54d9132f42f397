package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestClientOnlyParams: client_metadata is accepted and dropped (named for
// the warning header), generate is read and never sent upstream, and a
// parameter nobody knows is still OpenAI's 400.
func TestClientOnlyParams(t *testing.T) {
	r, e := Parse([]byte(`{"model":"m","input":"x","client_metadata":{"traceparent":"00-a-b-01"},"generate":false,"prompt_cache_key":"k"}`))
	if e != nil {
		t.Fatal(e)
	}
	if r.IgnoredValue() != "client_metadata" || !r.WarmupOnly() || r.Fields["client_metadata"] != nil || r.Fields["generate"] != nil || r.Fields["prompt_cache_key"] == nil {
		t.Fatalf("%+v", r)
	}
	if r, _ := Parse([]byte(`{"model":"m","input":"x","generate":true}`)); r.WarmupOnly() || r.IgnoredValue() != "" {
		t.Fatalf("generate:true is a normal create: %+v", r)
	}
	for _, tc := range []struct{ body, param, code string }{
		{`{"model":"m","input":"x","generate":"no"}`, "generate", CodeInvalidType},
		{`{"model":"m","input":"x","client_metadatas":{}}`, "client_metadatas", CodeUnknownParameter},
	} {
		if _, e := Parse([]byte(tc.body)); e == nil || deref(e.Param) != tc.param || deref(e.Code) != tc.code {
			t.Errorf("%s: %v", tc.body, e)
		}
	}
}

// TestContinueWarmup: a message continuing the warm-up gets its input in
// front of its own and continues what the warm-up continued; any other
// message is left alone.
func TestContinueWarmup(t *testing.T) {
	w := &Warmup{ID: "resp_w", Input: []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"first"}`)}, PreviousID: "resp_p"}
	for _, tc := range []struct{ msg, wantInput, wantPrev string }{
		{`{"type":"response.create","previous_response_id":"resp_w","input":[]}`, `[{"type":"message","role":"user","content":"first"}]`, "resp_p"},
		{`{"type":"response.create","previous_response_id":"resp_w","input":"more"}`, `"text":"more"`, "resp_p"},
		{`{"type":"response.create","previous_response_id":"resp_other","input":"x"}`, `"x"`, "resp_other"},
	} {
		out, e := ContinueWarmup([]byte(tc.msg), w)
		if e != nil {
			t.Fatal(e)
		}
		var got struct {
			Input json.RawMessage `json:"input"`
			Prev  string          `json:"previous_response_id"`
		}
		_ = json.Unmarshal(out, &got)
		if !strings.Contains(string(got.Input), tc.wantInput) || got.Prev != tc.wantPrev {
			t.Errorf("%s: %s", tc.msg, out)
		}
	}
	out, _ := ContinueWarmup([]byte(`{"previous_response_id":"resp_w"}`), &Warmup{ID: "resp_w", Input: w.Input})
	if strings.Contains(string(out), "previous_response_id") {
		t.Errorf("a first warm-up continues nothing: %s", out)
	}
	if _, e := ContinueWarmup([]byte(`{"previous_response_id":"resp_w","input":7}`), w); e == nil || deref(e.Param) != "input" {
		t.Errorf("bad input: %v", e)
	}
}

// TestEchoShape: partial reasoning and text objects are completed with
// OpenAI's defaults; anything else is echoed as sent.
func TestEchoShape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"reasoning", `{"effort":"low"}`, `{"effort":"low","summary":null}`},
		{"reasoning", `{"effort":"high","summary":"auto"}`, `{"effort":"high","summary":"auto"}`},
		{"text", `{"verbosity":"low"}`, `{"format":{"type":"text"},"verbosity":"low"}`},
		{"text", `{"format":{"type":"json_object"}}`, `{"format":{"type":"json_object"}}`},
		{"service_tier", `"priority"`, `"priority"`},
	} {
		if got := string(echoShape(tc.name, json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("%s %s: got %s want %s", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestChatDropped: what a chat-completions backend has no equivalent for is
// named; what it maps or passes is not.
func TestChatDropped(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","input":"x","include":["reasoning.encrypted_content"],"reasoning":{"effort":"low","summary":"auto"},"truncation":"auto","max_tool_calls":2,"context_management":[{"type":"compaction"}]}`,
			"context_management include max_tool_calls reasoning.summary truncation"},
		{`{"model":"m","input":"x","reasoning":{"effort":"low"},"truncation":"disabled","service_tier":"flex","prompt_cache_key":"k","top_logprobs":2}`, ""},
	} {
		r, e := Parse([]byte(tc.body))
		if e != nil {
			t.Fatal(e)
		}
		if got := strings.Join(r.ChatDropped(0), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
		if got := strings.Join(r.ChatDropped(8192), " "); strings.Contains(got, "truncation") {
			t.Errorf("with a context window the caller truncates: %q", got)
		}
	}
	r, _ := Parse([]byte(`{"model":"m","input":"x","stream":true,"stream_options":{"include_obfuscation":true},"client_metadata":{}}`))
	r.Ignore("include", "client_metadata")
	if got := r.IgnoredValue(); got != "client_metadata, include, stream_options.include_obfuscation" {
		t.Fatalf("%q", got)
	}
}
