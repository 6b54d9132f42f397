package stack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// chatProfile adds a Chat Completions profile "chat" at baseURL serving
// models, and makes it the default.
func chatProfile(baseURL string, mutate func(*profiles.Profile), models ...string) func(*Config) {
	return func(c *Config) {
		if baseURL == "" {
			sb, err := c.Profiles.Get("sandbox")
			if err != nil {
				panic(err)
			}
			baseURL = sb.BaseURL // the same sandbox, its chat endpoint
		}
		p := profiles.Profile{Name: "chat", API: profiles.APIChatCompletions, BaseURL: baseURL, DefaultModel: models[0], Models: models[1:],
			Sandbox: true, AttemptTimeout: 2 * time.Second, TurnTimeout: 6 * time.Second, MaxRetries: 2, MaxConcurrent: 64,
			Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModeNative}}
		if mutate != nil {
			mutate(&p)
		}
		c.Profiles.Put(p)
		c.Profiles.Default = "chat"
	}
}

// TestGatewayChatConformance: the Open Responses conformance suite against
// the gateway with a Chat Completions profile in front of the sandbox's
// chat endpoint. The backend keeps nothing, so the sandbox cannot name the
// response a turn continues (Stateless); TestGatewayChatSandbox checks the
// replayed messages instead.
func TestGatewayChatConformance(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1"))
	url, _ := e.gateway(func(c *httpapi.Config) { c.MaxBodyBytes = 8 << 20 })
	conformance.Run(t, url+"/v1", "sandbox-1", conformance.Options{Deterministic: true, Stateless: true})
	if n := e.sb.Snapshot().Requests; n == 0 {
		t.Fatal("no request reached the sandbox")
	}
	for _, b := range e.sb.LastRequests() {
		if !json.Valid(b) || !strings.Contains(string(b), `"messages"`) {
			t.Fatalf("a request that is not Chat Completions reached the sandbox: %s", b)
		}
	}
}

// TestGatewayChatSandbox: openai-go through the gateway and the whole
// pipeline to the sandbox's chat endpoint: create, stream, a function-call
// round trip and continuation by previous_response_id (replayed as
// messages, since the backend keeps nothing).
func TestGatewayChatSandbox(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1"))
	_, client := e.gateway()
	ctx := ctxT(t)

	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Explain the retry policy")}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r1.OutputText(); !strings.Contains(txt, "Sandbox reply") || !strings.Contains(txt, "Explain the retry policy") || r1.Usage.TotalTokens == 0 {
		t.Fatalf("create: %q usage %+v", txt, r1.Usage)
	}
	if sent := sentBody(t, e.sb.LastRequest()); sent["messages"] == nil || sent["input"] != nil {
		t.Fatalf("upstream body %v", sent)
	}

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream the answer please")}})
	text, final := drain(t, stream)
	if !strings.Contains(final.OutputText(), "Stream the answer please") || text != final.OutputText() {
		t.Fatalf("stream: deltas %q final %q", text, final.OutputText())
	}
	sent := sentBody(t, e.sb.LastRequest())
	if sent["stream"] != true || sent["stream_options"] == nil {
		t.Fatalf("streamed upstream body %v", sent)
	}

	// A function call and its output, then a plain continuation.
	tool := responses.ToolParamOfFunction("lookup", map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}, false)
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`find it [call:lookup {"q":"retry"}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseFunctionToolCall
	for _, it := range r2.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	if call.Name != "lookup" || call.Arguments != `{"q":"retry"}` || !strings.HasPrefix(call.CallID, "call_") {
		t.Fatalf("function call %+v", r2.Output)
	}
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r2.ID),
		Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{functionOutput(call.CallID, "in retry.go")}}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r3.OutputText(); !strings.Contains(txt, `Tool lookup (`+call.CallID+`) returned "in retry.go".`) {
		t.Fatalf("after the output: %q", txt)
	}
	r4, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r3.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And the backoff?")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r4.OutputText(), "And the backoff?") {
		t.Fatalf("continuation: %q", r4.OutputText())
	}
	var up struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(e.sb.LastRequest(), &up); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range up.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); !strings.HasSuffix(got, "user,assistant,tool,assistant,user") {
		t.Fatalf("replayed conversation roles %s", got)
	}
	n := len(up.Messages)
	if up.Messages[n-4].ToolCalls[0].ID != call.CallID || up.Messages[n-3].ToolCallID != call.CallID {
		t.Fatalf("the tool call and its output must keep the call id %s: %+v", call.CallID, up.Messages)
	}
}

// drain reads a Responses stream, checking sequence numbers, and returns
// the text deltas and the accumulated response.
func drain(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (string, *responses.Response) {
	t.Helper()
	var acc responses.ResponseAccumulator
	last := int64(-1)
	text := ""
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber <= last {
			t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("accumulator rejected %s: %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	return text, final
}

// fakeChat is an independent Chat Completions server, written for these
// tests and sharing no code with the sandbox or the translation: it checks
// what OpenAI checks (a tool message answers a tool call of the assistant
// message before it) and answers by fixed rules.
type fakeChat struct {
	mu     sync.Mutex
	bodies [][]byte
	fail   []func(w http.ResponseWriter) // answers for the next requests, in order
}

type fakeMsg struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m fakeMsg) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b []string
	for _, p := range parts {
		b = append(b, p.Text)
	}
	return strings.Join(b, "\n")
}

func (f *fakeChat) last() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[len(f.bodies)-1]
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, 404)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	var fail func(http.ResponseWriter)
	if len(f.fail) > 0 {
		fail, f.fail = f.fail[0], f.fail[1:]
	}
	f.mu.Unlock()
	if fail != nil {
		fail(w)
		return
	}
	var req struct {
		Model         string            `json:"model"`
		Messages      []fakeMsg         `json:"messages"`
		Tools         []json.RawMessage `json:"tools"`
		Stream        bool              `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":"bad request: %v","type":"invalid_request_error","param":"messages","code":null}}`, err)
		return
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case "assistant":
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				w.WriteHeader(400)
				fmt.Fprintf(w, `{"error":{"message":"messages[%d]: tool message for unknown call %s","type":"invalid_request_error","param":"messages","code":null}}`, i, m.ToolCallID)
				return
			}
		default:
			open = map[string]bool{}
		}
	}
	last := req.Messages[len(req.Messages)-1]
	var text string
	var call *[2]string // id, arguments
	switch {
	case last.Role == "tool":
		text = "Fake saw tool output: " + last.text()
	case strings.Contains(last.text(), "weather") && len(req.Tools) > 0:
		call = &[2]string{fmt.Sprintf("call_fake_%d", len(req.Messages)), `{"city":"Paris"}`}
	default:
		var roles []string
		for _, m := range req.Messages {
			roles = append(roles, m.Role)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(last.text()), "\n")
		text = fmt.Sprintf("Fake echo of %q (roles %s)", first, strings.Join(roles, ","))
	}
	usage := `{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":2}}`
	if !req.Stream {
		msg := fmt.Sprintf(`{"role":"assistant","content":%q}`, text)
		finish := "stop"
		if call != nil {
			msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"get_weather","arguments":%q}}]}`, call[0], call[1])
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-fake","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`,
			req.Model, msg, finish, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s); w.(http.Flusher).Flush() }
	send(`{"id":"chatcmpl-fake","choices":[{"index":0,"delta":{"role":"assistant"}}]}`)
	finish := "stop"
	if call != nil {
		finish = "tool_calls"
		send(fmt.Sprintf(`{"id":"chatcmpl-fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`, call[0]))
		half := len(call[1]) / 2
		for _, a := range []string{call[1][:half], call[1][half:]} {
			send(fmt.Sprintf(`{"id":"chatcmpl-fake","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}}]}`, a))
		}
	} else {
		half := len(text) / 2
		for _, p := range []string{text[:half], text[half:]} {
			send(fmt.Sprintf(`{"id":"chatcmpl-fake","choices":[{"index":0,"delta":{"content":%q}}]}`, p))
		}
	}
	send(fmt.Sprintf(`{"id":"chatcmpl-fake","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(`{"id":"chatcmpl-fake","choices":[],"usage":` + usage + `}`)
	}
	send("[DONE]")
}

// TestGatewayChatFake: the same client paths against an independent Chat
// Completions server: create (usage with cached tokens), stream, a
// function-call round trip keeping the server's call id, continuation
// replayed as messages in order; a 429 with Retry-After is retried after
// the wait; a 200 whose body is an error is an error; a 400 keeps its
// message, param and code; /v1/models lists the
// profile's models and an unknown model is a 404.
func TestGatewayChatFake(t *testing.T) {
	fake := &fakeChat{}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	e := newEnv(t, sandbox.Options{}, chatProfile(hs.URL+"/v1", func(p *profiles.Profile) { p.Sandbox = false }, "fake-1", "fake-large"))
	url, client := e.gateway()
	ctx := ctxT(t)

	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-large",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r1.OutputText(); !strings.Contains(txt, "Fake echo of") || !strings.Contains(txt, "(roles user)") ||
		r1.Usage.InputTokens != 11 || r1.Usage.OutputTokens != 5 || r1.Usage.InputTokensDetails.CachedTokens != 2 {
		t.Fatalf("create: %q usage %+v", txt, r1.Usage)
	}
	if sent := sentBody(t, fake.last()); sent["model"] != "fake-large" {
		t.Fatalf("upstream model %v", sent["model"])
	}

	_, final := drain(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "fake-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream to me")}}))
	if !strings.Contains(final.OutputText(), "Fake echo of") || final.Usage.TotalTokens != 16 {
		t.Fatalf("stream: %q usage %+v", final.OutputText(), final.Usage)
	}

	weather := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "fake-1", Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("what is the weather in Paris?")}})
	_, r2 := drain(t, stream)
	var call responses.ResponseFunctionToolCall
	for _, it := range r2.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	if !strings.HasPrefix(call.CallID, "call_fake_") || call.Arguments != `{"city":"Paris"}` || call.Name != "get_weather" {
		t.Fatalf("streamed function call %+v", r2.Output)
	}
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-1", PreviousResponseID: openai.String(r2.ID),
		Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{functionOutput(call.CallID, "18 C, sunny")}}})
	if err != nil {
		t.Fatal(err)
	}
	if r3.OutputText() != "Fake saw tool output: 18 C, sunny" {
		t.Fatalf("after the output: %q", r3.OutputText())
	}
	r4, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-1", PreviousResponseID: openai.String(r3.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("thanks")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r4.OutputText(), "(roles user,assistant,tool,assistant,user)") {
		t.Fatalf("continuation replayed: %q", r4.OutputText())
	}

	// Errors: a 429 with Retry-After is waited out and retried; a 200
	// whose body is an error object is an error with its status.
	retried := time.Now()
	fake.mu.Lock()
	fake.fail = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`))
	}}
	fake.mu.Unlock()
	if r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("after a 429")}}); err != nil || !strings.Contains(r.OutputText(), "Fake echo") {
		t.Fatalf("429 then success: %v %+v", err, r)
	}
	if waited := time.Since(retried); waited < time.Second {
		t.Fatalf("Retry-After 1 not honoured: retried after %s", waited)
	}
	fake.mu.Lock()
	for range 3 {
		fake.fail = append(fake.fail, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"error":{"message":"Provider overloaded","code":503}}`))
		})
	}
	fake.mu.Unlock()
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("an error in a 200")}})
	if ae := apiErr(t, err); ae.StatusCode != 503 || !strings.Contains(ae.Message, "Provider overloaded") {
		t.Fatalf("200 error body: %d %s", ae.StatusCode, ae.Message)
	}

	fake.mu.Lock()
	fake.fail = append(fake.fail, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"error":{"message":"messages[1].content: too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
	})
	fake.mu.Unlock()
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "fake-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a 400")}})
	if ae := apiErr(t, err); ae.StatusCode != 400 || ae.Param != "messages" || ae.Code != "context_length_exceeded" || ae.Message != "messages[1].content: too long" {
		t.Fatalf("400: %d %q %q %q", ae.StatusCode, ae.Param, ae.Code, ae.Message)
	}

	code, body := getJSON(t, url+"/v1/models")
	if code != 200 || !strings.Contains(body, `"id":"fake-large","object":"model","created":0,"owned_by":"chat"`) {
		t.Fatalf("models %d %s", code, body)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-nonexistent",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	if ae := apiErr(t, err); ae.StatusCode != 404 || ae.Code != "model_not_found" || !strings.Contains(ae.Message, "fake-large") {
		t.Fatalf("unknown model: %d %s %s", ae.StatusCode, ae.Code, ae.Message)
	}
}

func apiErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	ae, ok := err.(*openai.Error)
	if !ok {
		t.Fatalf("want an API error, got %v", err)
	}
	return ae
}

func getJSON(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestChatBusRoutingAndEmulation: a bus client (no HTTP) names a model as
// "profile/model" and the envelope routes the turn to that Chat
// Completions profile with the prefix removed; with toolMode prompt the
// tools go as instructions in the system message, no tools field is sent,
// and the <tool_call> text comes back as tool calls.
func TestChatBusRoutingAndEmulation(t *testing.T) {
	script := `Checking. <tool_call>{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}</tool_call>`
	e := newEnv(t, sandbox.Options{Script: []string{script}}, chatProfile("", func(p *profiles.Profile) {
		p.Capabilities.ToolMode = profiles.ToolModePrompt
	}, "sandbox-1"), func(c *Config) { c.Profiles.Default = "sandbox" })
	req := weatherTurn("t1")
	req.ConversationId = "conv-chat-emu"
	req.AgentContext = &contracts.AgentContext{Model: "chat/sandbox-1"}
	turn := e.turn(req)
	r := turn.Response
	if turn.LLM == nil || turn.LLM.Backend != "chat" || r.Kind != contracts.KindOK || r.FinishReason != contracts.FinishToolUse ||
		len(r.ToolCalls) != 1 || r.ToolCalls[0].ArgumentsJson != `{"city":"Paris"}` || r.Text != "Checking. " {
		t.Fatalf("turn %+v llm %+v", r, turn.LLM)
	}
	sent := sentBody(t, e.sb.LastRequest())
	msgs := sent["messages"].([]any)
	first := msgs[0].(map[string]any)
	if sent["model"] != "sandbox-1" || sent["tools"] != nil || first["role"] != "system" ||
		!strings.HasPrefix(first["content"].(string), "Tool calling instructions:") {
		t.Fatalf("upstream request %v", sent)
	}
}

// TestChatClientPaths: the other client paths on a Chat Completions
// backend: WebSocket create and continuation on the socket, background
// create to completion, a background response cancelled while the model
// runs, and the MCP tool loop (its second round replays the call and its
// output as messages).
func TestChatClientPaths(t *testing.T) {
	e, mcpSrv := toolEnv(t, chatProfile("", func(p *profiles.Profile) { p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second }, "sandbox-1"))
	url, client := e.gateway()
	ctx := ctxT(t)

	c := wsDial(t, url)
	first := wsCompleted(t, wsCreate(t, c, map[string]any{"model": "sandbox-1", "input": "Remember the code word: cobalt."}))
	second := wsCompleted(t, wsCreate(t, c, map[string]any{"model": "sandbox-1", "previous_response_id": first.ID, "input": "What is the code word?"}))
	if !strings.Contains(second.text(), "What is the code word?") || !strings.Contains(string(e.sb.LastRequest()), "cobalt") {
		t.Fatalf("websocket continuation: %q; upstream %s", second.text(), e.sb.LastRequest())
	}

	r, err := client.Responses.New(ctx, bgParams("Explain the retry policy in the background"))
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := waitStatus(t, client, r.ID, "completed"); !strings.Contains(done.OutputText(), "Explain the retry policy in the background") {
		t.Fatalf("background: %q", done.OutputText())
	}

	lt, err := client.Responses.New(ctx, loopParams(`Add them [call:add {"a":2,"b":3}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(lt), ","); got != "mcp_list_tools,mcp_call,message" || !strings.Contains(lt.OutputText(), `returned "5"`) || mcpSrv.Calls("add") != 1 {
		t.Fatalf("tool loop: items %s text %q", got, lt.OutputText())
	}
	var up struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(e.sb.LastRequest(), &up); err != nil {
		t.Fatal(err)
	}
	if n := len(up.Messages); n < 3 || up.Messages[n-2].Role != "assistant" || up.Messages[n-1].Role != "tool" {
		t.Fatalf("second round messages %+v", up.Messages)
	}
}

// TestChatCancelInProgress: cancelling a background response while the
// Chat Completions call runs ends it cancelled, and it stays cancelled
// after the model's time has passed; every stage settles.
func TestChatCancelInProgress(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 3 * time.Second}, chatProfile("", func(p *profiles.Profile) { p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second }, "sandbox-1"))
	_, client := e.gateway()
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgParams("Cancel me while the model runs"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, client, r.ID, "in_progress")
	time.Sleep(300 * time.Millisecond) // the call is out
	c, err := client.Responses.Cancel(ctx, r.ID)
	if err != nil || c.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %v", err, c.Status)
	}
	time.Sleep(3 * time.Second)
	if got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("after the model's time: %v %v", err, got.Status)
	}
	e.settled()
}
