package stack

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// Codex (openai/codex) as a client: the request shapes its Responses
// client sends, over HTTP and over WebSocket mode, written down as fixtures
// in testdata/codex from the fields its request structs serialize
// (store:false with reasoning.encrypted_content, prompt_cache_key,
// service_tier, text.verbosity, client_metadata, a custom tool, replayed
// reasoning items, and the generate:false warm-up over a socket).

func codexFixture(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "codex", name))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range vars {
		b = bytes.ReplaceAll(b, []byte("{{"+k+"}}"), []byte(v))
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not JSON", name)
	}
	return b
}

// codexSSE posts a fixture and returns the final response of its stream
// and the response headers.
func codexSSE(t *testing.T, url string, body []byte) (json.RawMessage, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// Headers Codex sets on every turn.
	req.Header.Set("originator", "codex_cli_rs")
	req.Header.Set("session_id", "0199b0a4-5c1e-7d52-9f0a-6c3b2d1e4f50")
	req.Header.Set("OpenAI-Beta", "responses=experimental")
	req.Header.Set("x-codex-turn-metadata", `{"turn":1}`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, raw)
	}
	var final json.RawMessage
	for _, block := range strings.Split(string(raw), "\n\n") {
		_, data, ok := strings.Cut(block, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if final == nil {
		t.Fatalf("no response.completed: %s", raw)
	}
	return final, resp.Header
}

func TestCodexHTTP(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	for _, tc := range []struct{ fixture, want string }{
		{"http_first_turn.json", "codex-http-ok"},
		{"http_replayed_history.json", "codex-history-ok"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			final, hdr := codexSSE(t, url, codexFixture(t, tc.fixture, nil))
			var r wsResponse
			_ = json.Unmarshal(final, &r)
			if r.Status != "completed" || !strings.Contains(r.text(), tc.want) || r.Store {
				t.Fatalf("status %s store %v text %q", r.Status, r.Store, r.text())
			}
			if got := hdr.Get("X-Aptix-Ignored-Params"); got != "client_metadata" {
				t.Fatalf("X-Aptix-Ignored-Params %q", got)
			}
			// What a backend decides travels upstream; what none takes does not.
			sent := sentBody(t, e.sb.LastRequest())
			for _, k := range []string{"prompt_cache_key", "reasoning", "include", "parallel_tool_calls"} {
				if sent[k] == nil {
					t.Fatalf("%s did not reach the backend: %s", k, e.sb.LastRequest())
				}
			}
			if sent["client_metadata"] != nil {
				t.Fatalf("client_metadata reached the backend")
			}
			// Replayed reasoning items keep their encrypted_content.
			if tc.fixture == "http_replayed_history.json" && !strings.Contains(string(e.sb.LastRequest()), "gAAAAABo-opaque-reasoning-state") {
				t.Fatalf("the reasoning item was not replayed: %s", e.sb.LastRequest())
			}
			// The response echoes what was applied, in the response object's shape.
			var echo struct {
				Reasoning struct {
					Effort  string  `json:"effort"`
					Summary *string `json:"summary"`
				} `json:"reasoning"`
				PromptCacheKey string `json:"prompt_cache_key"`
			}
			_ = json.Unmarshal(final, &echo)
			if echo.Reasoning.Effort == "" || echo.Reasoning.Summary == nil || echo.PromptCacheKey == "" {
				t.Fatalf("echo: %s", final)
			}
		})
	}
	// generate:false has nothing to continue it over HTTP: refused by name.
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(`{"model":"sandbox-1","input":"x","generate":false}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(raw), `"param":"generate"`) {
		t.Fatalf("generate:false over HTTP: %d %s", resp.StatusCode, raw)
	}
}

func TestCodexWebSocket(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	hdr := http.Header{}
	hdr.Set("OpenAI-Beta", "responses_websockets=2026-02-06")
	hdr.Set("originator", "codex_cli_rs")
	hdr.Set("session_id", "0199b0a4-6a00-7000-8000-000000000001")
	hdr.Set("x-codex-turn-metadata", `{"turn":1}`)
	c, resp, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	send := func(b []byte) wsTurn {
		t.Helper()
		if err := c.Write(ctxT(t), websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		return wsRead(t, c)
	}
	before := e.sb.Requests()

	// The warm-up: a completed response, no output, zero usage, no model call.
	warm := send(codexFixture(t, "ws_warmup.json", nil))
	if warm.err != nil {
		t.Fatalf("warm-up: %s", warm.err)
	}
	var w struct {
		ID     string            `json:"id"`
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
		Usage  *struct {
			Total int `json:"total_tokens"`
		} `json:"usage"`
		ServiceTier    string `json:"service_tier"`
		PromptCacheKey string `json:"prompt_cache_key"`
	}
	_ = json.Unmarshal(warm.final, &w)
	if w.Status != "completed" || len(w.Output) != 0 || w.Usage == nil || w.Usage.Total != 0 || w.ServiceTier != "priority" || w.PromptCacheKey == "" {
		t.Fatalf("warm-up response: %s", warm.final)
	}
	if got := []string{warm.events[0].Type, warm.events[len(warm.events)-1].Type}; len(warm.events) != 3 || got[0] != "response.created" || got[1] != "response.completed" {
		t.Fatalf("warm-up events %v", warm.events)
	}
	if n := e.sb.Requests(); n != before {
		t.Fatalf("the warm-up called the model (%d requests, want %d)", n, before)
	}

	// The turn continues the warm-up with no new input: it runs the
	// warm-up's input.
	turn := wsCompleted(t, send(codexFixture(t, "ws_after_warmup.json", map[string]string{"previous": w.ID})))
	if !strings.Contains(turn.text(), "codex-ws-ok") {
		t.Fatalf("turn after warm-up: %q", turn.text())
	}
	sent := sentBody(t, e.sb.LastRequest())
	if sent["service_tier"] != "priority" || sent["prompt_cache_key"] == nil || sent["client_metadata"] != nil || sent["generate"] != nil {
		t.Fatalf("upstream body: %s", e.sb.LastRequest())
	}

	// The next turn continues the store:false response on the socket with
	// only the new input, a structured-output format and context_management.
	next := wsCompleted(t, send(codexFixture(t, "ws_next_turn.json", map[string]string{"previous": turn.ID})))
	if next.PreviousResponseID == nil || *next.PreviousResponseID != turn.ID {
		t.Fatalf("previous_response_id %v, want %s", next.PreviousResponseID, turn.ID)
	}

	// A refused create is an error event Codex reads as the request's
	// answer: it needs status_code.
	bad := send(codexFixture(t, "ws_next_turn.json", map[string]string{"previous": "resp_0000000000000000000000000000beef"}))
	var ev struct {
		StatusCode int `json:"status_code"`
	}
	if bad.err == nil || json.Unmarshal(bad.err, &ev) != nil || ev.StatusCode != 400 || bad.errCode() != "previous_response_not_found" {
		t.Fatalf("refused create: %s", bad.err)
	}
}

// TestCodexChatBackend: a Codex request served by a chat-completions
// backend: what has an equivalent there is mapped (reasoning.effort to
// reasoning_effort) or passed as it is (prompt_cache_key), and what has
// none is named in X-Aptix-Ignored-Params instead of being refused.
func TestCodexChatBackend(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1"))
	url, _ := e.gateway()
	final, hdr := codexSSE(t, url, codexFixture(t, "http_replayed_history.json", nil))
	var r wsResponse
	_ = json.Unmarshal(final, &r)
	if r.Status != "completed" || !strings.Contains(r.text(), "codex-history-ok") {
		t.Fatalf("status %s text %q", r.Status, r.text())
	}
	if got := hdr.Get("X-Aptix-Ignored-Params"); got != "client_metadata, include, reasoning.summary" {
		t.Fatalf("X-Aptix-Ignored-Params %q", got)
	}
	sent := sentBody(t, e.sb.LastRequest())
	if sent["messages"] == nil || sent["reasoning_effort"] != "high" || sent["prompt_cache_key"] == nil ||
		sent["include"] != nil || sent["reasoning"] != nil || sent["client_metadata"] != nil {
		t.Fatalf("chat body: %s", e.sb.LastRequest())
	}
}
