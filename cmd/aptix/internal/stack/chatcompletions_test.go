package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// chatBackend is a backend kind the Chat Completions door is tested on.
type chatBackend struct {
	name  string
	model string
	env   func(t *testing.T) (*env, *fakeChat)
	// toolReply is what the model says after the tool message.
	toolReply string
}

// chatBackends: the sandbox's Responses API, the sandbox's Chat
// Completions endpoint, and the independent fake Chat Completions server.
var chatBackends = []chatBackend{
	{"responses sandbox", "sandbox-1", func(t *testing.T) (*env, *fakeChat) { return newEnv(t, sandbox.Options{}), nil }, ""},
	{"chat sandbox", "sandbox-1", func(t *testing.T) (*env, *fakeChat) {
		return newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1")), nil
	}, `returned "18 C, sunny"`},
	{"chat fake", "fake-1", func(t *testing.T) (*env, *fakeChat) {
		fake := &fakeChat{}
		hs := httptest.NewServer(fake)
		t.Cleanup(hs.Close)
		return newEnv(t, sandbox.Options{}, chatProfile(hs.URL+"/v1", func(p *profiles.Profile) { p.Sandbox = false }, "fake-1")), fake
	}, "Fake saw tool output: 18 C, sunny"},
}

// weatherAsk makes every backend call get_weather: the sandbox by its
// [call:…] marker, the fake by the word weather.
const weatherAsk = `What is the weather in Paris? [call:get_weather {"city":"Paris"}]`

var weatherParams = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}

// TestChatCompletionsOpenAIGo: openai-go's Chat.Completions.New,
// NewStreaming with its ChatCompletionAccumulator (usage in the last
// chunk), and a tool round trip (the model calls a function, the client
// sends the tool message back), against the gateway on each backend kind.
func TestChatCompletionsOpenAIGo(t *testing.T) {
	for _, b := range chatBackends {
		t.Run(b.name, func(t *testing.T) {
			e, fake := b.env(t)
			_, client := e.gateway()
			ctx := ctxT(t)

			c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: b.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage("Explain the retry policy")}})
			if err != nil {
				t.Fatal(err)
			}
			if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" ||
				c.Choices[0].Message.Content == "" || c.Usage.TotalTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
				t.Fatalf("completion %s", c.RawJSON())
			}
			if fake != nil && (c.Usage.PromptTokensDetails.CachedTokens != 2 || !strings.Contains(c.Choices[0].Message.Content, "(roles system,user)")) {
				t.Fatalf("fake backend: %s", c.RawJSON())
			}

			s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: b.model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream the answer please")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
			var acc openai.ChatCompletionAccumulator
			var text string
			n := 0
			for s.Next() {
				ch := s.Current()
				if !acc.AddChunk(ch) {
					t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
				}
				if len(ch.Choices) > 0 {
					text += ch.Choices[0].Delta.Content
				}
				n++
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if got := acc.Choices[0].Message.Content; got == "" || got != text || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens == 0 || n < 3 {
				t.Fatalf("streamed %q (deltas %q) finish %q usage %+v in %d chunks", got, text, acc.Choices[0].FinishReason, acc.Usage, n)
			}

			tool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: weatherParams})
			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(weatherAsk)}
			s = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: b.model, Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{tool}})
			acc = openai.ChatCompletionAccumulator{}
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			m := acc.Choices[0].Message
			if acc.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" ||
				m.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || m.ToolCalls[0].ID == "" {
				t.Fatalf("streamed tool call: finish %q %+v", acc.Choices[0].FinishReason, m.ToolCalls)
			}
			msgs = append(msgs, m.ToParam(), openai.ToolMessage("18 C, sunny", m.ToolCalls[0].ID))
			c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: b.model, Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{tool}})
			if err != nil {
				t.Fatal(err)
			}
			if c.Choices[0].FinishReason != "stop" || len(c.Choices[0].Message.ToolCalls) != 0 || !strings.Contains(c.Choices[0].Message.Content, b.toolReply) {
				t.Fatalf("after the tool message: %s", c.RawJSON())
			}
			if fake != nil {
				var sent struct {
					Messages []fakeMsg `json:"messages"`
				}
				if err := json.Unmarshal(fake.last(), &sent); err != nil || len(sent.Messages) != 3 || sent.Messages[2].Role != "tool" || sent.Messages[2].ToolCallID != m.ToolCalls[0].ID {
					t.Fatalf("upstream messages %s", fake.last())
				}
			}

			// A non-streamed call, then n > 1 and an unknown parameter: OpenAI's 400s.
			c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: b.model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(weatherAsk)},
				Tools: []openai.ChatCompletionToolUnionParam{tool}})
			if err != nil || c.Choices[0].FinishReason != "tool_calls" || c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
				t.Fatalf("tool call: %v %s", err, c.RawJSON())
			}
			_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: b.model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}, N: openai.Int(2)})
			if ae := apiError(t, err, 400, "invalid_value"); ae.Param != "n" {
				t.Fatalf("n: %+v", ae)
			}
		})
	}
}

// TestChatCompletionsGoOpenAI: the same with github.com/sashabaranov/go-openai,
// a client that shares no code with openai-go.
func TestChatCompletionsGoOpenAI(t *testing.T) {
	for _, b := range chatBackends {
		t.Run(b.name, func(t *testing.T) {
			e, fake := b.env(t)
			url, _ := e.gateway()
			cfg := goopenai.DefaultConfig("unused")
			cfg.BaseURL = url + "/v1"
			client := goopenai.NewClientWithConfig(cfg)
			ctx := ctxT(t)

			c, err := client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: b.model, Messages: []goopenai.ChatCompletionMessage{
				{Role: goopenai.ChatMessageRoleSystem, Content: "Be terse."}, {Role: goopenai.ChatMessageRoleUser, Content: "Explain the retry policy"}}})
			if err != nil {
				t.Fatal(err)
			}
			if c.Object != "chat.completion" || c.Choices[0].FinishReason != goopenai.FinishReasonStop || c.Choices[0].Message.Content == "" || c.Usage.TotalTokens == 0 {
				t.Fatalf("completion %+v", c)
			}
			if fake != nil && (c.Usage.PromptTokensDetails == nil || c.Usage.PromptTokensDetails.CachedTokens != 2) {
				t.Fatalf("usage %+v", c.Usage)
			}

			stream, err := client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: b.model, Stream: true,
				StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
				Messages:      []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Stream the answer please"}}})
			if err != nil {
				t.Fatal(err)
			}
			var text string
			var finish goopenai.FinishReason
			var usage *goopenai.Usage
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Choices) > 0 {
					text += r.Choices[0].Delta.Content
					if r.Choices[0].FinishReason != "" {
						finish = r.Choices[0].FinishReason
					}
				}
				if r.Usage != nil {
					usage = r.Usage
				}
			}
			stream.Close()
			if text == "" || finish != goopenai.FinishReasonStop || usage == nil || usage.TotalTokens == 0 {
				t.Fatalf("streamed %q finish %q usage %+v", text, finish, usage)
			}

			tools := []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "get_weather", Parameters: weatherParams}}}
			msgs := []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: weatherAsk}}
			stream, err = client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: b.model, Stream: true, Messages: msgs, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			var call goopenai.ToolCall
			finish = ""
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Choices) == 0 {
					continue
				}
				for _, tc := range r.Choices[0].Delta.ToolCalls {
					if tc.Index == nil || *tc.Index != 0 {
						t.Fatalf("tool call delta without index 0: %+v", tc)
					}
					if tc.ID != "" {
						call.ID, call.Type, call.Function.Name = tc.ID, tc.Type, tc.Function.Name
					}
					call.Function.Arguments += tc.Function.Arguments
				}
				if r.Choices[0].FinishReason != "" {
					finish = r.Choices[0].FinishReason
				}
			}
			stream.Close()
			if finish != goopenai.FinishReasonToolCalls || call.ID == "" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` {
				t.Fatalf("streamed call %+v finish %q", call, finish)
			}
			msgs = append(msgs, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, ToolCalls: []goopenai.ToolCall{call}},
				goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: call.ID, Content: "18 C, sunny"})
			c, err = client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: b.model, Messages: msgs, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if c.Choices[0].FinishReason != goopenai.FinishReasonStop || !strings.Contains(c.Choices[0].Message.Content, b.toolReply) {
				t.Fatalf("after the tool message: %+v", c.Choices[0])
			}

			_, err = client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: b.model, N: 2,
				Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "x"}}})
			var ae *goopenai.APIError
			if !errors.As(err, &ae) || ae.HTTPStatusCode != 400 || ae.Param == nil || *ae.Param != "n" {
				t.Fatalf("n = 2: %v", err)
			}
		})
	}
}

// TestChatCompletionsAsSent: a recording upstream shows what reaches each
// backend kind. A Chat Completions backend gets the client's body as
// sent: its system message, a developer message, an image part, the
// assistant's tool call and the tool message, stop and seed, with only
// the model routed and the stream flags set. A Responses backend gets the
// system and developer messages as input messages of those roles (not
// instructions) and the tool round as function_call and
// function_call_output items, and X-Aptix-Ignored-Params names stop and
// seed, which it has no place for.
func TestChatCompletionsAsSent(t *testing.T) {
	body := `{"model":"%s","messages":[{"role":"system","content":"Be terse."},{"role":"developer","content":"Answer in French."},` +
		`{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18 C"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"stop":["\n\n"],"seed":42,"temperature":0.5}`
	post := func(t *testing.T, url, model string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(strings.Replace(body, "%s", model, 1)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return resp
	}

	t.Run("chat completions backend", func(t *testing.T) {
		fake := &fakeChat{}
		hs := httptest.NewServer(fake)
		t.Cleanup(hs.Close)
		e := newEnv(t, sandbox.Options{}, chatProfile(hs.URL+"/v1", func(p *profiles.Profile) {
			p.Sandbox = false
			p.Aliases = map[string]string{"my-alias": "fake-1"}
			p.Chat.DeveloperRole = true // else the server's quirk sends it as system
		}, "fake-1"))
		url, _ := e.gateway()
		resp := post(t, url, "my-alias")
		if h := resp.Header.Get(responses.IgnoredHeader); h != "" {
			t.Fatalf("ignored on a chat backend: %s", h)
		}
		var got, want map[string]any
		if err := json.Unmarshal(fake.last(), &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(strings.Replace(body, "%s", "fake-1", 1)), &want)
		gm, _ := json.Marshal(got)
		wm, _ := json.Marshal(want)
		if string(gm) != string(wm) {
			t.Fatalf("upstream body\n got %s\nwant %s", gm, wm)
		}
	})

	t.Run("responses backend", func(t *testing.T) {
		e := newEnv(t, sandbox.Options{})
		url, _ := e.gateway()
		resp := post(t, url, "sandbox-1")
		if h := resp.Header.Get(responses.IgnoredHeader); h != "seed, stop" {
			t.Fatalf("%s: %q", responses.IgnoredHeader, h)
		}
		var sent struct {
			Instructions *string          `json:"instructions"`
			Input        []map[string]any `json:"input"`
			Temperature  float64          `json:"temperature"`
			Stop         any              `json:"stop"`
			Seed         any              `json:"seed"`
		}
		if err := json.Unmarshal(e.sb.LastRequest(), &sent); err != nil {
			t.Fatal(err)
		}
		if sent.Instructions != nil || sent.Stop != nil || sent.Seed != nil || sent.Temperature != 0.5 {
			t.Fatalf("upstream body %s", e.sb.LastRequest())
		}
		var kinds []string
		for _, it := range sent.Input {
			k, _ := it["type"].(string)
			if r, ok := it["role"].(string); ok {
				k += ":" + r
			}
			kinds = append(kinds, k)
		}
		if got := strings.Join(kinds, ","); got != "message:system,message:developer,message:user,function_call,function_call_output" {
			t.Fatalf("upstream input %s: %s", got, e.sb.LastRequest())
		}
		if c, _ := sent.Input[0]["content"].(string); c != "Be terse." {
			if parts, _ := json.Marshal(sent.Input[0]["content"]); !strings.Contains(string(parts), `"Be terse."`) {
				t.Fatalf("system message %v", sent.Input[0])
			}
		}
		if img, _ := json.Marshal(sent.Input[2]); !strings.Contains(string(img), `"input_image"`) || !strings.Contains(string(img), "What is in this picture?") {
			t.Fatalf("user message %s", img)
		}
		if fc := sent.Input[3]; fc["call_id"] != "call_1" || fc["arguments"] != `{"city":"Paris"}` || sent.Input[4]["output"] != "18 C" {
			t.Fatalf("tool round %v %v", sent.Input[3], sent.Input[4])
		}
	})
}

// TestChatCompletionsDisconnect: a chat client that hangs up mid-stream
// cancels its turn (it has no id to come back for it with): the model
// call is aborted and the turn completes cancelled, within its budgets
// and on record for the console.
func TestChatCompletionsDisconnect(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 2 * time.Second})
	_, client := e.gateway()
	ctx, cancel := context.WithCancel(context.Background())
	s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("I will hang up")}})
	if !s.Next() || s.Current().Choices[0].Delta.Role != "assistant" {
		t.Fatalf("first chunk: %v", s.Err())
	}
	id := strings.TrimPrefix(s.Current().ID, "chatcmpl-")
	cancel()
	_ = s.Close()
	st, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := st.GetLastMsgForSubject(context.Background(), "aptix.completed.>")
		if err == nil {
			var turn contracts.Turn
			if json.Unmarshal(m.Data, &turn) == nil && strings.ReplaceAll(turn.TurnId, "-", "") == id {
				if turn.Failure == nil || turn.Failure.Code != "cancelled" {
					t.Fatalf("the turn of a client that hung up completed with %+v", turn.Failure)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no cancelled completion within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChatCompletionsBudget: a chat request is a turn like any other for
// authentication, usage and budgets: without a key it is a 401; a key's
// chat turns are counted in its usage with their cost, and once its
// budget is spent the next chat request is OpenAI's 429 before any model
// call.
func TestChatCompletionsBudget(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, priced(20))
	keys, key := keyWithBudget(t, e, "chatter", contracts.Budget{USD: 0.02, Period: contracts.PeriodDay})
	var logs logBuf
	url := e.authGateway(&auth.Chain{Keys: keys}, &logs)
	msg := `{"model":"sandbox-1","messages":[{"role":"user","content":"spend a little"}]}`
	if status, _, body := call(t, "POST", url+"/v1/chat/completions", msg, nil); status != 401 {
		t.Fatalf("without a key: %d %s", status, body)
	}
	ctx := ctxT(t)
	client := as(url, key)
	ok, refused := 0, false
	for i := 0; i < 40 && !refused; i++ {
		e.usageOf()
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("turn %d: spend a little of the budget", i))}})
		if err == nil {
			ok++
			continue
		}
		if ae := apiError(t, err, 429, "budget_exceeded"); ae.Type != "insufficient_quota" {
			t.Fatalf("refusal %+v", ae)
		}
		refused = true
	}
	if !refused || ok < 1 {
		t.Fatalf("%d chat turns, refused %v", ok, refused)
	}
	calls := e.sb.Requests()
	if status, _, body := call(t, "POST", url+"/v1/chat/completions", msg, bearer(key)); status != 429 || !strings.Contains(body, `"code":"budget_exceeded"`) {
		t.Fatalf("after the refusal: %d %s", status, body)
	}
	if e.sb.Requests() != calls {
		t.Fatal("the model was called after the refusal")
	}
	e.usageOf()
	if turns, nanos := e.spentBy("key:chatter"); turns != ok || nanos == 0 {
		t.Fatalf("completed chat turns: %d costing %d n$, want %d", turns, nanos, ok)
	}
}
