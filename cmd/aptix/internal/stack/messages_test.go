package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oresponses "github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// messagesBackend is a backend kind the Messages door is tested on.
type messagesBackend struct {
	name string
	env  func(t *testing.T) (*env, *fakeAnthropic)
	// thinking: the backend speaks Messages, so thinking blocks come back
	// and cross every turn; on another they are named as ignored.
	thinking bool
	// toolReply is what the model says after the tool result.
	toolReply string
}

// anthropicProfile routes every model to a Messages backend at baseURL
// (the sandbox's own Messages endpoint when empty).
func anthropicProfile(baseURL string, models ...string) func(*Config) {
	return func(c *Config) {
		if baseURL == "" {
			sb, err := c.Profiles.Get("sandbox")
			if err != nil {
				panic(err)
			}
			baseURL = sb.BaseURL
		}
		c.Profiles.Put(profiles.Profile{Name: "anthropic", API: profiles.APIAnthropicMessages, BaseURL: baseURL, DefaultModel: models[0], Models: models[1:],
			Sandbox: true, AttemptTimeout: 2 * time.Second, TurnTimeout: 6 * time.Second, MaxRetries: 2, MaxConcurrent: 64,
			Anthropic:    profiles.Anthropic{Version: profiles.DefaultAnthropicVersion, MaxTokens: 1024},
			Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModeNative}})
		c.Profiles.Default = "anthropic"
	}
}

var messagesBackends = []messagesBackend{
	{"messages sandbox", func(t *testing.T) (*env, *fakeAnthropic) {
		return newEnv(t, sandbox.Options{}, anthropicProfile("", "sandbox-1")), nil
	}, true, `returned "18 C, sunny"`},
	{"anthropic fake", func(t *testing.T) (*env, *fakeAnthropic) {
		fake := newFakeAnthropic()
		hs := httptest.NewServer(fake)
		t.Cleanup(hs.Close)
		return newEnv(t, sandbox.Options{}, anthropicProfile(hs.URL+"/v1", "claude-fake")), fake
	}, true, "Fake saw tool result: 18 C, sunny"},
	{"responses sandbox", func(t *testing.T) (*env, *fakeAnthropic) { return newEnv(t, sandbox.Options{}), nil }, false, `returned "18 C, sunny"`},
	{"chat sandbox", func(t *testing.T) (*env, *fakeAnthropic) {
		return newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1")), nil
	}, false, `returned "18 C, sunny"`},
}

func anthropicClient(url string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(url), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0)}, opts...)...)
}

var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}

// TestMessagesAnthropicSDK: anthropic-sdk-go's Messages.New,
// NewStreaming accumulated into a message, a tool-use round trip,
// thinking blocks across three turns and CountTokens, against the gateway
// on each backend kind: the sandbox's Messages endpoint and a recording
// fake Anthropic server (the client's body forwarded, thinking and
// signatures back unchanged), the sandbox's Responses API and its Chat
// Completions endpoint (translated; thinking named in
// X-Aptix-Ignored-Params).
func TestMessagesAnthropicSDK(t *testing.T) {
	for _, b := range messagesBackends {
		t.Run(b.name, func(t *testing.T) {
			e, fake := b.env(t)
			url, _ := e.gateway()
			client := anthropicClient(url)
			ctx := ctxT(t)
			model := anthropic.Model("sandbox-1")
			if fake != nil {
				model = "claude-fake"
			}

			m, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200,
				System:   []anthropic.TextBlockParam{{Text: "Be terse.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Explain the retry policy"))}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.StopReason != anthropic.StopReasonEndTurn ||
				len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text == "" || m.Usage.OutputTokens == 0 {
				t.Fatalf("message %s", m.RawJSON())
			}
			if fake != nil {
				m, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200, StopSequences: []string{"END"},
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Stop at END"))}})
				if err != nil || m.StopReason != anthropic.StopReasonStopSequence || m.StopSequence != "END" {
					t.Fatalf("stop sequence: %v %s", err, m.RawJSON())
				}
			}
			if fake != nil && (m.Usage.InputTokens != 11 || m.Usage.CacheReadInputTokens != 2 || m.Usage.CacheCreationInputTokens != 3 || m.Usage.OutputTokens != 7) {
				t.Fatalf("usage as the backend said it: %s", m.RawJSON())
			}

			s := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Stream the answer please"))}})
			var acc anthropic.Message
			var text string
			n := 0
			for s.Next() {
				ev := s.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatalf("accumulate %s: %v", ev.RawJSON(), err)
				}
				if d, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
					text += d.Delta.Text
				}
				n++
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text == "" || acc.Content[0].Text != text || acc.StopReason != anthropic.StopReasonEndTurn || n < 5 {
				t.Fatalf("streamed %+v (deltas %q) stop %q in %d events", acc.Content, text, acc.StopReason, n)
			}

			// A tool round trip, streamed.
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(weatherAsk))}
			s = client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200, Messages: msgs, Tools: []anthropic.ToolUnionParam{weatherTool}})
			acc = anthropic.Message{}
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			var use *anthropic.ContentBlockUnion
			for i := range acc.Content {
				if acc.Content[i].Type == "tool_use" {
					use = &acc.Content[i]
				}
			}
			if acc.StopReason != anthropic.StopReasonToolUse || use == nil || use.Name != "get_weather" || !strings.Contains(string(use.Input), "Paris") {
				t.Fatalf("tool call: stop %q content %+v", acc.StopReason, acc.Content)
			}
			msgs = append(msgs, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "18 C, sunny", false)))
			m, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200, Messages: msgs, Tools: []anthropic.ToolUnionParam{weatherTool}})
			if err != nil {
				t.Fatal(err)
			}
			if m.StopReason != anthropic.StopReasonEndTurn || len(m.Content) == 0 || !strings.Contains(m.Content[len(m.Content)-1].Text, b.toolReply) {
				t.Fatalf("after the tool result: %s", m.RawJSON())
			}

			// Thinking across three turns, alternating plain and streamed.
			var hdr http.Header
			msgs = nil
			var sent []anthropic.ContentBlockUnion // every thinking block the backend gave
			for turn := range 3 {
				msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("Think about step %d", turn))))
				params := anthropic.MessageNewParams{Model: model, MaxTokens: 2048, Messages: msgs, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)}
				var got anthropic.Message
				if turn == 1 {
					s := client.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(new(*http.Response)))
					for s.Next() {
						if err := got.Accumulate(s.Current()); err != nil {
							t.Fatal(err)
						}
					}
					if err := s.Err(); err != nil {
						t.Fatalf("turn %d: %v", turn, err)
					}
				} else {
					var raw *http.Response
					mm, err := client.Messages.New(ctx, params, aoption.WithResponseInto(&raw))
					if err != nil {
						t.Fatalf("turn %d: %v", turn, err)
					}
					got, hdr = *mm, raw.Header
				}
				var thinking []anthropic.ContentBlockUnion
				for _, c := range got.Content {
					if c.Type == "thinking" {
						thinking = append(thinking, c)
					}
				}
				if b.thinking && (len(thinking) != 1 || got.Content[0].Type != "thinking" || thinking[0].Signature == "") {
					t.Fatalf("turn %d: want a signed thinking block first, got %+v", turn, got.Content)
				}
				if !b.thinking && len(thinking) != 0 {
					t.Fatalf("turn %d: thinking from a backend that has none: %+v", turn, got.Content)
				}
				sent = append(sent, thinking...)
				msgs = append(msgs, got.ToParam())
			}
			if h := hdr.Get(responses.IgnoredHeader); b.thinking && h != "" {
				t.Fatalf("a Messages backend gets the body as sent, yet %s: %q", responses.IgnoredHeader, h)
			}
			if !b.thinking {
				// Thinking from another model (here a forged one) cannot
				// cross to a backend that does not speak Messages: named.
				var raw *http.Response
				_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 200, Messages: []anthropic.MessageParam{
					anthropic.NewUserMessage(anthropic.NewTextBlock("Hello")),
					anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig", "hmm"), anthropic.NewTextBlock("Hi")),
					anthropic.NewUserMessage(anthropic.NewTextBlock("Again"))}}, aoption.WithResponseInto(&raw))
				if err != nil {
					t.Fatal(err)
				}
				if h := raw.Header.Get(responses.IgnoredHeader); !strings.Contains(h, "messages[].content[].thinking") {
					t.Fatalf("%s: %q, want the thinking block named", responses.IgnoredHeader, h)
				}
			}
			if fake != nil {
				fake.checkReturned(t, sent)
			}

			ct, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: model,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this?"))}})
			if err != nil {
				t.Fatal(err)
			}
			if ct.InputTokens < 5 || fake != nil && ct.InputTokens != 42 {
				t.Fatalf("count_tokens %s", ct.RawJSON())
			}
		})
	}
}

// TestMessagesChangedSignatureRefused: a thinking block whose signature a
// client (or a proxy) changed reaches the Messages backend as sent, and
// the backend's refusal comes back as Anthropic's 400.
func TestMessagesChangedSignatureRefused(t *testing.T) {
	for _, b := range messagesBackends[:2] {
		t.Run(b.name, func(t *testing.T) {
			e, fake := b.env(t)
			url, _ := e.gateway()
			client := anthropicClient(url)
			ctx := ctxT(t)
			model := anthropic.Model("sandbox-1")
			if fake != nil {
				model = "claude-fake"
			}
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Think first"))}
			m, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 2048, Messages: msgs, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)})
			if err != nil {
				t.Fatal(err)
			}
			tampered := m.ToParam()
			tampered.Content[0].OfThinking.Signature += "x"
			msgs = append(msgs, tampered, anthropic.NewUserMessage(anthropic.NewTextBlock("And again")))
			_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 2048, Messages: msgs, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)})
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Error(), "Invalid `signature` in `thinking` block") {
				t.Fatalf("want 400 invalid signature, got %v", err)
			}
		})
	}
}

// TestMessagesErrors: Anthropic's error shape and statuses at the door:
// a missing max_tokens, an unknown member, a bad key.
func TestMessagesErrors(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	for _, c := range []struct {
		name, body string
		status     int
		typ, want  string
	}{
		{"no max_tokens", `{"model":"sandbox-1","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"unknown member", `{"model":"sandbox-1","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"frobnicate":1}`, 400, "invalid_request_error", "frobnicate: Extra inputs are not permitted"},
		{"bad role", `{"model":"sandbox-1","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, 400, "invalid_request_error", "messages.0.role"},
		{"too large", `{"model":"sandbox-1","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`, 413, "request_too_large", ""},
		{"unknown model", `{"model":"nowhere/claude-9","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error", "nowhere"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != c.status || body.Type != "error" || body.Error.Type != c.typ || !strings.Contains(body.Error.Message, c.want) {
				t.Fatalf("%d %+v", resp.StatusCode, body)
			}
		})
	}
}

// fakeAnthropic is an independent Messages server that records what it
// is sent: it answers text, a tool_use for a weather question, a thinking
// block (with a signature of its own making, bytes chosen to trip any
// re-encoding: HTML characters, a line separator, non-ASCII) when thinking
// is enabled, and refuses a thinking block it did not send, byte for byte,
// as Anthropic does.
type fakeAnthropic struct {
	mu      sync.Mutex
	issued  map[string]string // signature → thinking
	bodies  [][]byte
	headers []http.Header
	n       int
}

func newFakeAnthropic() *fakeAnthropic { return &fakeAnthropic{issued: map[string]string{}} }

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	}
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	if strings.Contains(r.Header.Get("Anthropic-Beta"), "test-overloaded") {
		fail(529, "overloaded_error", "Overloaded")
		return
	}
	if r.URL.Path == "/v1/messages/count_tokens" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":42}`)
		return
	}
	if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") == "" && r.Header.Get("Authorization") != "" || r.Header.Get("Anthropic-Version") == "" {
		fail(400, "invalid_request_error", fmt.Sprintf("fake: %s with x-api-key %q, anthropic-version %q", r.URL.Path, r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version")))
		return
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		MaxTokens     *int     `json:"max_tokens"`
		StopSequences []string `json:"stop_sequences"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.MaxTokens == nil {
		fail(400, "invalid_request_error", fmt.Sprintf("fake: bad body %v: %s", err, body))
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.n++
	n := f.n
	f.mu.Unlock()
	var lastText, toolResult string
	for i, m := range req.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Thinking  string          `json:"thinking"`
			Signature string          `json:"signature"`
			Content   json.RawMessage `json:"content"`
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			lastText = s
			continue
		}
		_ = json.Unmarshal(m.Content, &blocks)
		for j, b := range blocks {
			switch b.Type {
			case "text":
				lastText = b.Text
			case "thinking":
				f.mu.Lock()
				want, ok := f.issued[b.Signature]
				f.mu.Unlock()
				if !ok || want != b.Thinking {
					fail(400, "invalid_request_error", fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j))
					return
				}
			case "tool_result":
				if json.Unmarshal(b.Content, &toolResult) != nil {
					var inner []struct{ Text string }
					_ = json.Unmarshal(b.Content, &inner)
					for _, in := range inner {
						toolResult += in.Text
					}
				}
			}
		}
	}
	var content []map[string]any
	if req.Thinking != nil && req.Thinking.Type == "enabled" {
		th := fmt.Sprintf("Step %d: <b>&</b> \u2028 über \"quoted\" \\ thinking", n)
		sig := fmt.Sprintf("EqQBCkYIBxgCKkB+/fake=%d==", n)
		f.mu.Lock()
		f.issued[sig] = th
		f.mu.Unlock()
		content = append(content, map[string]any{"type": "thinking", "thinking": th, "signature": sig})
	}
	stop := "end_turn"
	switch {
	case toolResult != "":
		content = append(content, map[string]any{"type": "text", "text": "Fake saw tool result: " + toolResult})
	case strings.Contains(lastText, "weather"):
		content = append(content, map[string]any{"type": "text", "text": "Let me check."},
			map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", n), "name": "get_weather", "input": map[string]string{"city": "Paris"}})
		stop = "tool_use"
	default:
		content = append(content, map[string]any{"type": "text", "text": "Fake answer number " + fmt.Sprint(n) + " to: " + lastText})
	}
	var stopSeq any
	if len(req.StopSequences) > 0 && stop == "end_turn" {
		stop, stopSeq = "stop_sequence", req.StopSequences[0]
	}
	usage := map[string]int{"input_tokens": 11, "output_tokens": 7, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 2}
	msg := map[string]any{"id": fmt.Sprintf("msg_fake%d", n), "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stop, "stop_sequence": stopSeq, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	start := map[string]any{"id": msg["id"], "type": "message", "role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 11, "output_tokens": 1, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 2}}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]any{"type": "ping"})
	for i, c := range content {
		delta := func(d map[string]any) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch c["type"] {
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			th := c["thinking"].(string)
			delta(map[string]any{"type": "thinking_delta", "thinking": th[:5]})
			delta(map[string]any{"type": "thinking_delta", "thinking": th[5:]})
			delta(map[string]any{"type": "signature_delta", "signature": c["signature"]})
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, w := range strings.SplitAfter(c["text"].(string), " ") {
				delta(map[string]any{"type": "text_delta", "text": w})
			}
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			delta(map[string]any{"type": "input_json_delta", "partial_json": `{"city":`})
			delta(map[string]any{"type": "input_json_delta", "partial_json": `"Paris"}`})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": stopSeq}, "usage": map[string]int{"output_tokens": 7}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// checkReturned: every thinking block the client got came from the fake
// with its text and signature unchanged, and every later request carried
// each one back exactly (the fake refuses any other).
func (f *fakeAnthropic) checkReturned(t *testing.T, got []anthropic.ContentBlockUnion) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no thinking blocks came back")
	}
	for _, b := range got {
		if want, ok := f.issued[b.Signature]; !ok || want != b.Thinking {
			t.Fatalf("thinking %q with signature %q is not what the fake sent", b.Thinking, b.Signature)
		}
	}
	last := string(f.bodies[len(f.bodies)-1])
	for _, b := range got[:len(got)-1] {
		if !strings.Contains(last, b.Signature) {
			t.Fatalf("the last request lacks signature %q: %s", b.Signature, last)
		}
	}
}

// TestAnthropicBackendTranslated: an anthropic-messages backend serves the
// other doors through the translation. A Responses client (openai-go)
// continues with previous_response_id across three turns with reasoning:
// Aptix replays the history as messages, and the fake refuses any
// thinking block or signature that does not come back exactly as it sent
// it; cache reads count as cached tokens. A chat client's tool round
// trip goes through too.
func TestAnthropicBackendTranslated(t *testing.T) {
	fake := newFakeAnthropic()
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	e := newEnv(t, sandbox.Options{}, anthropicProfile(hs.URL+"/v1", "claude-fake"))
	_, client := e.gateway()
	ctx := ctxT(t)
	prev := ""
	for turn := range 3 {
		params := responsesParams(fmt.Sprintf("Think about step %d", turn), prev)
		var r *oresponses.Response
		if turn == 1 {
			s := client.Responses.NewStreaming(ctx, params)
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					rr := ev.Response
					r = &rr
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		} else {
			var err error
			if r, err = client.Responses.New(ctx, params); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
		if r == nil || r.Status != "completed" || !strings.Contains(r.OutputText(), "Fake answer") || r.Usage.InputTokensDetails.CachedTokens != 2 || r.Usage.InputTokens != 16 {
			t.Fatalf("turn %d: %+v", turn, r)
		}
		prev = r.ID
	}
	fake.mu.Lock()
	last := string(fake.bodies[len(fake.bodies)-1])
	fake.mu.Unlock()
	if n := strings.Count(last, `"type":"thinking"`); n != 2 {
		t.Fatalf("the third turn replayed %d thinking blocks, want 2: %s", n, last)
	}

	// What the translation cannot carry is named.
	var raw *http.Response
	params := responsesParams("Answer in JSON", "")
	params.Text = oresponses.ResponseTextConfigParam{Format: oresponses.ResponseFormatTextConfigUnionParam{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}
	params.PromptCacheKey = openai.String("k")
	if _, err := client.Responses.New(ctx, params, option.WithResponseInto(&raw)); err != nil {
		t.Fatal(err)
	}
	if h := raw.Header.Get(responses.IgnoredHeader); h != "prompt_cache_key, text.format" {
		t.Fatalf("%s: %q", responses.IgnoredHeader, h)
	}

	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude-fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather?")},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: weatherParams})}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("chat: %s", c.RawJSON())
	}
}

// responsesParams is a Responses create with reasoning, continuing prev.
func responsesParams(text, prev string) oresponses.ResponseNewParams {
	p := oresponses.ResponseNewParams{Model: "claude-fake", Input: oresponses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow}}
	if prev != "" {
		p.PreviousResponseID = openai.String(prev)
	}
	return p
}

// TestMessagesClaudeCodeShape replays a request shaped as Claude Code
// sends it (written from its public documentation: system text blocks
// with cache_control, its tool list with JSON Schema input_schema,
// metadata.user_id, thinking, streaming, anthropic-beta) through the
// gateway. An Anthropic backend gets the body exactly as sent but for the
// model, with the client's anthropic-version and anthropic-beta; the
// answer streams in Anthropic's order (message_start, ping, the thinking
// block, text, tool_use, message_delta, message_stop). Another backend
// runs the translation, and names what it cannot carry.
func TestMessagesClaudeCodeShape(t *testing.T) {
	fixture, err := os.ReadFile("testdata/claude_code_messages.json")
	if err != nil {
		t.Fatal(err)
	}
	post := func(t *testing.T, url string) (http.Header, []string, string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", bytes.NewReader(fixture))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "unused")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("Anthropic-Beta", "interleaved-thinking-2025-05-14,example-beta-2025-01-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var seq []string
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				seq = append(seq, name)
			}
		}
		return resp.Header, seq, string(b)
	}

	t.Run("anthropic fake", func(t *testing.T) {
		fake := newFakeAnthropic()
		hs := httptest.NewServer(fake)
		t.Cleanup(hs.Close)
		e := newEnv(t, sandbox.Options{}, anthropicProfile(hs.URL+"/v1", "claude-real", "claude-fake"), func(c *Config) {
			p, _ := c.Profiles.Get("anthropic")
			p.Aliases = map[string]string{"claude-fake": "claude-real"} // the model name is routing: replaced
			c.Profiles.Put(p)
		})
		url, _ := e.gateway()
		h, seq, body := post(t, url)
		if h.Get(responses.IgnoredHeader) != "" {
			t.Fatalf("%s: %q on a Messages backend", responses.IgnoredHeader, h.Get(responses.IgnoredHeader))
		}
		// The thinking block first (its text, then its signature), the text, the tool call.
		want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
		first := strings.Index(body, "content_block_start")
		if got := strings.Join(seq, " "); got != want || !strings.Contains(body[first:first+200], `"type":"thinking"`) ||
			!strings.Contains(body, `"type":"signature_delta"`) || !strings.Contains(body, `"stop_reason":"tool_use"`) {
			t.Fatalf("events %s\n%s", got, body)
		}
		fake.mu.Lock()
		got, hdr := fake.bodies[len(fake.bodies)-1], fake.headers[len(fake.headers)-1]
		fake.mu.Unlock()
		var sent, arrived map[string]json.RawMessage
		_ = json.Unmarshal(fixture, &sent)
		_ = json.Unmarshal(got, &arrived)
		sent["model"] = json.RawMessage(`"claude-real"`)
		for k, v := range sent {
			// Each member's bytes as sent, whitespace between tokens aside:
			// nothing re-escaped (< stays <), nothing reordered.
			var a bytes.Buffer
			_ = json.Compact(&a, v)
			if a.String() != string(arrived[k]) {
				t.Errorf("%s arrived as %s, sent %s", k, arrived[k], a.String())
			}
		}
		if len(arrived) != len(sent) || hdr.Get("Anthropic-Beta") != "interleaved-thinking-2025-05-14,example-beta-2025-01-01" || hdr.Get("Anthropic-Version") != "2023-06-01" {
			t.Fatalf("arrived %s with %v", got, hdr)
		}
	})

	t.Run("responses sandbox", func(t *testing.T) {
		e := newEnv(t, sandbox.Options{})
		url, _ := e.gateway()
		fixture = bytes.Replace(fixture, []byte(`"claude-fake"`), []byte(`"sandbox-1"`), 1)
		h, seq, body := post(t, url)
		if got := h.Get(responses.IgnoredHeader); got != "messages[].content[].cache_control, system[].cache_control, tools[].cache_control" {
			t.Fatalf("%s: %q", responses.IgnoredHeader, got)
		}
		if got := strings.Join(seq, " "); !strings.HasPrefix(got, "message_start ping content_block_start") || !strings.HasSuffix(got, "message_delta message_stop") {
			t.Fatalf("events %s\n%s", got, body)
		}
	})
}

// TestMessagesBackendOverloaded: an Anthropic backend's 529, after the
// caller's retries, reaches the Messages client as Anthropic's 529
// overloaded_error with retry-after.
func TestMessagesBackendOverloaded(t *testing.T) {
	fake := newFakeAnthropic()
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	e := newEnv(t, sandbox.Options{}, anthropicProfile(hs.URL+"/v1", "claude-fake"))
	url, _ := e.gateway()
	var raw *http.Response
	client := anthropicClient(url)
	_, err := client.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "claude-fake", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}},
		aoption.WithHeader("anthropic-beta", "test-overloaded"), aoption.WithResponseInto(&raw))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 || !strings.Contains(ae.Error(), `"type":"overloaded_error"`) || raw.Header.Get("Retry-After") == "" {
		t.Fatalf("want 529 overloaded_error with retry-after, got %v", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.headers) != 3 {
		t.Fatalf("the backend was called %d times, want 3 (two retries)", len(fake.headers))
	}
}

// TestMessagesAuth: the Anthropic SDK's x-api-key carries an Aptix key
// (so does Authorization: Bearer); a wrong or missing one is Anthropic's
// 401 authentication_error.
func TestMessagesAuth(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keys.Create(ctx, "claude-code", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	params := anthropic.MessageNewParams{Model: "sandbox-1", MaxTokens: 50, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	good := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	if _, err := good.Messages.New(ctx, params); err != nil {
		t.Fatalf("x-api-key: %v", err)
	}
	bearer := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAuthToken(key), aoption.WithMaxRetries(0))
	if _, err := bearer.Messages.New(ctx, params); err != nil {
		t.Fatalf("bearer: %v", err)
	}
	bad := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("sk-wrong"), aoption.WithMaxRetries(0))
	_, err = bad.Messages.New(ctx, params)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || !strings.Contains(ae.Error(), `"type":"authentication_error"`) {
		t.Fatalf("want 401 authentication_error, got %v", err)
	}
}

// TestMessagesFramedAlias: an alias whose rule asks for Aptix's own turn
// (AGN-003 framing) makes a Messages request to an Anthropic backend go
// as the translation: the thinking blocks still cross with their
// signatures (the fake refuses any other), the rest that only Messages
// says is named.
func TestMessagesFramedAlias(t *testing.T) {
	fake := newFakeAnthropic()
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	e := newEnv(t, sandbox.Options{}, anthropicProfile(hs.URL+"/v1", "claude-fake"), func(c *Config) {
		p, _ := c.Profiles.Get("anthropic")
		p.Aliases = map[string]string{"claude-framed": "claude-fake"}
		p.AliasRules = map[string]profiles.Alias{"claude-framed": {Model: "claude-fake", Framing: "agn003", Mode: "ASK"}}
		c.Profiles.Put(p)
	})
	url, _ := e.gateway()
	client := anthropicClient(url)
	ctx := ctxT(t)
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Think"))}
	params := func() anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "claude-framed", MaxTokens: 4096, Messages: msgs, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024), TopK: anthropic.Int(5)}
	}
	m, err := client.Messages.New(ctx, params())
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Again")))
	var raw *http.Response
	m2, err := client.Messages.New(ctx, params(), aoption.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	last := string(fake.bodies[len(fake.bodies)-1])
	fake.mu.Unlock()
	if m.Content[0].Type != "thinking" || m2.Content[0].Type != "thinking" || !strings.Contains(last, m.Content[0].Signature) ||
		!strings.Contains(last, "[MODE: ASK]") || raw.Header.Get(responses.IgnoredHeader) != "top_k" {
		t.Fatalf("%s: %q; sent %s", responses.IgnoredHeader, raw.Header.Get(responses.IgnoredHeader), last)
	}
}
