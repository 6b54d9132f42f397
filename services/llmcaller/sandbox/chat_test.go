package sandbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

func chatClient(t *testing.T, o sandbox.Options) (openai.Client, *sandbox.Server) {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := sandbox.New(o)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return openai.NewClient(option.WithBaseURL(hs.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0)), srv
}

var lookupTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "lookup",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}}})

// TestChatCompletionsReply: openai-go's chat client gets the sandbox's
// deterministic sentence (mode, instruction, context chunk ids from a
// separate [CONTEXT] part) and usage.
func TestChatCompletionsReply(t *testing.T) {
	client, _ := chatClient(t, sandbox.Options{})
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "sandbox-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("[MODE: ANALYZE]\n\n[INSTRUCTION]\nExplain retries"),
			openai.TextContentPart("[CONTEXT]\n=== CHUNK 1 ===\nId: ck_9\nPath: a.go")})}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Choices[0].Message.Content
	if want := "Sandbox reply (mode ANALYZE) to: Explain retries. Context chunks: ck_9."; got != want || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %q (%s), want %q", got, c.Choices[0].FinishReason, want)
	}
	if c.Usage.TotalTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens || c.Object != "chat.completion" {
		t.Fatalf("usage %+v object %s", c.Usage, c.Object)
	}
}

// TestChatCompletionsToolRoundTrip: a [call:…] marker yields a tool call
// (finish_reason tool_calls, null content); the assistant message and the
// tool message sent back yield text quoting the output, in one stateless
// conversation; a tool message answering no call is OpenAI's 400.
func TestChatCompletionsToolRoundTrip(t *testing.T) {
	client, _ := chatClient(t, sandbox.Options{})
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`find it [call:lookup {"q":"retry"}]`)}
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{lookupTool}})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "lookup" ||
		m.ToolCalls[0].Function.Arguments != `{"q":"retry"}` || m.Content != "" {
		t.Fatalf("tool call reply %+v", c.Choices[0])
	}
	id := m.ToolCalls[0].ID
	msgs = append(msgs, m.ToParam(), openai.ToolMessage("found in retry.go", id))
	c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{lookupTool}})
	if err != nil {
		t.Fatal(err)
	}
	if txt := c.Choices[0].Message.Content; !strings.Contains(txt, `Tool lookup (`+id+`) returned "found in retry.go".`) || len(c.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("second reply %q", txt)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x"), openai.ToolMessage("out", "call_nobody")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "role 'tool'") {
		t.Fatalf("orphan tool message: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sandbox-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}, ParallelToolCalls: openai.Bool(true)})
	if !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Fatalf("parallel_tool_calls without tools: %v", err)
	}
}

// TestChatCompletionsStream: openai-go's accumulator rebuilds the streamed
// reply (text, or a tool call from fragments by index), usage arrives in
// the last chunk when asked for, and max_completion_tokens ends it with
// finish_reason length.
func TestChatCompletionsStream(t *testing.T) {
	client, _ := chatClient(t, sandbox.Options{})
	ctx := context.Background()
	run := func(p openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, int) {
		t.Helper()
		s := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		n := 0
		for s.Next() {
			acc.AddChunk(s.Current())
			n++
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return acc, n
	}
	acc, n := run(openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Explain the retry policy of the stage")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	if want := "Sandbox reply (mode unspecified) to: Explain the retry policy of the stage. Context chunks: none."; acc.Choices[0].Message.Content != want || n < 4 {
		t.Fatalf("streamed %q in %d chunks", acc.Choices[0].Message.Content, n)
	}
	if acc.Usage.TotalTokens == 0 || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("usage %+v finish %q", acc.Usage, acc.Choices[0].FinishReason)
	}
	acc, _ = run(openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`[call:lookup {"q":"a long enough query"}] [call:lookup {"q":"b"}]`)},
		Tools: []openai.ChatCompletionToolUnionParam{lookupTool}})
	tcs := acc.Choices[0].Message.ToolCalls
	if len(tcs) != 2 || tcs[0].Function.Arguments != `{"q":"a long enough query"}` || tcs[1].Function.Arguments != `{"q":"b"}` || tcs[0].ID == tcs[1].ID || acc.Usage.TotalTokens != 0 {
		t.Fatalf("streamed calls %+v usage %+v", tcs, acc.Usage)
	}
	acc, _ = run(openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Explain the retry policy of the stage")},
		MaxCompletionTokens: openai.Int(3)})
	if acc.Choices[0].FinishReason != "length" || len(acc.Choices[0].Message.Content) > 12 {
		t.Fatalf("limited: %q %q", acc.Choices[0].FinishReason, acc.Choices[0].Message.Content)
	}
}

// TestChatCompletionsFaults: the fault header applies to the chat
// endpoint: a 429 with Retry-After, and an error chunk mid-stream.
func TestChatCompletionsFaults(t *testing.T) {
	client, _ := chatClient(t, sandbox.Options{})
	ctx := context.Background()
	p := openai.ChatCompletionNewParams{Model: "sandbox-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	_, err := client.Chat.Completions.New(ctx, p, option.WithHeader(sandbox.HeaderFault, "429,retry-after=3"))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Response.Header.Get("Retry-After") != "3" {
		t.Fatalf("429 fault: %v", err)
	}
	s := client.Chat.Completions.NewStreaming(ctx, p, option.WithHeader(sandbox.HeaderFault, "stream-error"))
	for s.Next() {
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "stream-error") {
		t.Fatalf("stream-error fault: %v", s.Err())
	}
}
