package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
)

var req = contracts.AgentExecuteRequest{
	AgentContext:        &contracts.AgentContext{Id: "vscode"},
	ConversationContext: &contracts.ConversationContext{Id: "ddr"},
	ConversationId:      "conv-1", TurnId: "turn-1", Mode: "DDR_CREATION", Instruction: "x",
}

func ok(body string) contracts.LLMResult { return contracts.LLMResult{Status: 200, Body: body} }

const (
	textOnly = `{"id":"resp_1","model":"gpt-5.1-2025","status":"completed","output":[
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"First."},{"type":"output_text","text":"Second."}]},
		{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"output_text","text":"Third."}]}],
		"usage":{"input_tokens":210,"output_tokens":310,"total_tokens":520}}`
	toolOnly = `{"id":"resp_2","model":"gpt-5.1","status":"completed","output":[
		{"type":"function_call","id":"fc_1","call_id":"call_A","name":"ddr_document","arguments":"{\"title\": \"T\" }"}],
		"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}`
	mixed = `{"id":"resp_3","model":"m","status":"completed","output":[
		{"type":"message","content":[{"type":"output_text","text":"Calling."}]},
		{"type":"function_call","id":"fc_1","call_id":"call_A","name":"a","arguments":"{}"},
		{"type":"function_call","id":"fc_2","call_id":"call_B","name":"b","arguments":"{\"x\":1}"}]}`
	chatUsage  = `{"id":"resp_4","model":"m","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"prompt_tokens":210,"completion_tokens":310,"total_tokens":520}}`
	noTotal    = `{"id":"resp_5","model":"m","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":4}}`
	truncated  = `{"id":"resp_6","model":"m","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"Half a sen"}]}]}`
	filtered   = `{"id":"resp_7","model":"m","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[]}`
	failed     = `{"id":"resp_8","model":"m","status":"failed","error":{"code":"server_error","message":"The model crashed."},"output":[]}`
	refused    = `{"id":"resp_9","model":"m","status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"I can't help with that."}]}]}`
	openAI429  = `{"error":{"message":"Rate limit reached for gpt-5.1","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	fastAPI404 = `{"detail":"Not Found"}`
)

func TestMap(t *testing.T) {
	tests := []struct {
		name   string
		llm    contracts.LLMResult
		kind   string
		finish string
		text   string
		usage  contracts.LlmUsage
		calls  []contracts.AgentToolCall
		code   string
		msg    string
		respID string
	}{
		{name: "text from every message part, in order, joined by blank lines", llm: ok(textOnly), kind: "ok", finish: "stop",
			text: "First.\n\nSecond.\n\nThird.", usage: contracts.LlmUsage{PromptTokens: 210, CompletionTokens: 310, TotalTokens: 520}, respID: "resp_1"},
		{name: "tool-only: call_id, name, arguments verbatim", llm: ok(toolOnly), kind: "tool-only", finish: "tool_use",
			usage: contracts.LlmUsage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12},
			calls: []contracts.AgentToolCall{{CallId: "call_A", Name: "ddr_document", ArgumentsJson: `{"title": "T" }`}}, respID: "resp_2"},
		{name: "text and tool calls", llm: ok(mixed), kind: "ok", finish: "tool_use", text: "Calling.",
			calls: []contracts.AgentToolCall{{CallId: "call_A", Name: "a", ArgumentsJson: "{}"}, {CallId: "call_B", Name: "b", ArgumentsJson: `{"x":1}`}}, respID: "resp_3"},
		{name: "chat-completions usage names (the seed's example)", llm: ok(chatUsage), kind: "ok", finish: "stop", text: "hi",
			usage: contracts.LlmUsage{PromptTokens: 210, CompletionTokens: 310, TotalTokens: 520}, respID: "resp_4"},
		{name: "empty; total derived", llm: ok(noTotal), kind: "empty", finish: "stop", usage: contracts.LlmUsage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, respID: "resp_5"},
		{name: "truncated → length", llm: ok(truncated), kind: "ok", finish: "length", text: "Half a sen", respID: "resp_6"},
		{name: "content filter", llm: ok(filtered), kind: "empty", finish: "content_filter", respID: "resp_7"},
		{name: "failed response", llm: ok(failed), kind: "error", finish: "error", code: "server_error", msg: "The model crashed.", respID: "resp_8"},
		{name: "refusal is text", llm: ok(refused), kind: "ok", finish: "stop", text: "I can't help with that.", respID: "resp_9"},
		{name: "HTTP 429 with an OpenAI error", llm: contracts.LLMResult{Status: 429, Body: openAI429}, kind: "error", finish: "error",
			code: "rate_limit_exceeded", msg: "Rate limit reached for gpt-5.1"},
		{name: "HTTP 404 with a detail error", llm: contracts.LLMResult{Status: 404, Body: fastAPI404}, kind: "error", finish: "error",
			code: "http_404", msg: "Not Found"},
		{name: "HTTP 500, empty body", llm: contracts.LLMResult{Status: 500}, kind: "error", finish: "error",
			code: "http_500", msg: "the backend answered HTTP 500 with no error message"},
		{name: "transport error", llm: contracts.LLMResult{Error: &contracts.UpstreamError{Code: "timeout", Message: "no answer within 30s"}}, kind: "error", finish: "error",
			code: "timeout", msg: "no answer within 30s"},
		{name: "caller's parsed error wins", llm: contracts.LLMResult{Status: 401, Body: `{"error":{"message":"bad key"}}`, Error: &contracts.UpstreamError{Status: 401, Type: "invalid_request_error", Message: "Incorrect API key"}},
			kind: "error", finish: "error", code: "invalid_request_error", msg: "Incorrect API key"},
		{name: "malformed 200 body", llm: ok(`{"id": "resp_`), kind: "error", finish: "error", code: CodeMalformedResponse, msg: "not a /responses object"},
		{name: "error object in a 200", llm: ok(`{"error":{"message":"overloaded","type":"server_error"}}`), kind: "error", finish: "error", code: "server_error", msg: "overloaded"},
		{name: "background response not finished", llm: ok(`{"id":"resp_q","status":"queued","output":[]}`), kind: "error", finish: "error", code: CodeNotFinished, msg: "queued", respID: "resp_q"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sources := []contracts.SourceRef{{Id: "ctx_1", Path: "a.cs", StartLine: 1, EndLine: 2}}
			got := Map(Input{Request: req, LLM: tt.llm, Sources: sources, Warnings: []string{"context truncated"}})
			if got.Kind != tt.kind || got.FinishReason != tt.finish || got.Text != tt.text {
				t.Fatalf("kind %q finish %q text %q; want %q %q %q", got.Kind, got.FinishReason, got.Text, tt.kind, tt.finish, tt.text)
			}
			if got.Usage != tt.usage {
				t.Errorf("usage %+v, want %+v", got.Usage, tt.usage)
			}
			if len(got.ToolCalls) != len(tt.calls) {
				t.Fatalf("tool calls %+v, want %+v", got.ToolCalls, tt.calls)
			}
			for i := range tt.calls {
				if got.ToolCalls[i] != tt.calls[i] {
					t.Errorf("call %d = %+v, want %+v", i, got.ToolCalls[i], tt.calls[i])
				}
			}
			if got.ErrorCode != tt.code || !strings.Contains(got.ErrorMessage, tt.msg) || (tt.msg == "") != (got.ErrorMessage == "") {
				t.Errorf("error %q %q, want %q containing %q", got.ErrorCode, got.ErrorMessage, tt.code, tt.msg)
			}
			if got.ResponseContinuationId != tt.respID {
				t.Errorf("responseContinuationId %q, want %q", got.ResponseContinuationId, tt.respID)
			}
			if got.RawResponseJson != tt.llm.Body {
				t.Error("rawResponseJson must be the body verbatim")
			}
			if got.ConversationId != "conv-1" || got.TurnId != "turn-1" || got.AgentContextId != "vscode" || got.ConversationContextId != "ddr" || got.Mode != "DDR_CREATION" {
				t.Errorf("ids not carried: %+v", got)
			}
			if len(got.Sources) != 1 || got.Warnings[0] != "context truncated" {
				t.Errorf("sources %v warnings %v not carried", got.Sources, got.Warnings)
			}
		})
	}
}

func TestModelIDAndTruncationWarning(t *testing.T) {
	got := Map(Input{Request: req, LLM: ok(textOnly)})
	if got.ModelId != "gpt-5.1-2025" {
		t.Fatalf("modelId %q", got.ModelId)
	}
	got = Map(Input{Request: req, LLM: ok(truncated)})
	if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "max_output_tokens") {
		t.Fatalf("warnings %v", got.Warnings)
	}
}

func TestFailed(t *testing.T) {
	got := contracts.FailedResponse(req, contracts.Failure{Stage: "enveloped", Code: "invalid_tools", Message: "toolsJson: not an array"}, nil, nil)
	if got.Kind != "error" || got.ErrorCode != "invalid_tools" || got.ErrorMessage != "toolsJson: not an array" || got.ToolCalls == nil || got.Sources == nil {
		t.Fatalf("%+v", got)
	}
	// Empty lists are [] on the wire, not null: clients index them without checks.
	b, _ := json.Marshal(got)
	for _, want := range []string{`"sources":[]`, `"warnings":[]`, `"toolCalls":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s not in %s", want, b)
		}
	}
}

// TestEmulatedToolCalls: a body the LLM caller rewrote from <tool_call>
// text maps like a native answer, and rawResponseJson is what the backend
// really sent.
func TestEmulatedToolCalls(t *testing.T) {
	upstream := `{"id":"resp_e","model":"local","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"<tool_call>{\"name\":\"a\"}</tool_call>"}]}]}`
	rewritten := `{"id":"resp_e","model":"local","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"a","arguments":"{}","status":"completed"}]}`
	got := Map(Input{Request: req, LLM: contracts.LLMResult{Status: 200, Body: rewritten, UpstreamBody: upstream}})
	if got.Kind != contracts.KindToolOnly || got.FinishReason != contracts.FinishToolUse || len(got.ToolCalls) != 1 ||
		got.ToolCalls[0].CallId != "call_1" || got.Text != "" || got.RawResponseJson != upstream {
		t.Fatalf("%+v", got)
	}
	if got := Map(Input{Request: req, LLM: ok(textOnly)}); got.RawResponseJson != textOnly {
		t.Fatal("without emulation rawResponseJson is the body")
	}
}

// FuzzMapNeverPanics: any body and status map to a response with a kind.
func FuzzMapNeverPanics(f *testing.F) {
	for _, s := range []string{textOnly, toolOnly, failed, openAI429, fastAPI404, `{"output":[{"type":"message","content":null}]}`, `[]`, `null`} {
		f.Add(200, s)
	}
	f.Add(500, `{"error":{"code":42}}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		got := Map(Input{Request: req, LLM: contracts.LLMResult{Status: status, Body: body}})
		switch got.Kind {
		case contracts.KindOK, contracts.KindToolOnly, contracts.KindEmpty:
		case contracts.KindError:
			if got.ErrorCode == "" || got.ErrorMessage == "" {
				t.Fatalf("error without code or message: %+v", got)
			}
		default:
			t.Fatalf("kind %q", got.Kind)
		}
	})
}

// TestMapReadsTheTypedResult: given the turn's typed result, the mapping
// reads it and does not decode the body again (the body here is garbage,
// yet the answer is the typed result's); rawResponseJson stays the body.
func TestMapReadsTheTypedResult(t *testing.T) {
	doc, err := oresponse.ParseString(toolOnly)
	if err != nil {
		t.Fatal(err)
	}
	r := Map(Input{Request: req, LLM: ok("not decoded again"), Result: doc})
	if r.Kind != contracts.KindToolOnly || r.ToolCalls[0].CallId != "call_A" || r.Usage.TotalTokens != 12 || r.RawResponseJson != "not decoded again" {
		t.Fatalf("%+v", r)
	}
	// Without it, the mapping decodes the body itself.
	if r := Map(Input{Request: req, LLM: ok("not decoded again")}); r.ErrorCode != CodeMalformedResponse {
		t.Fatalf("%+v", r)
	}
}
