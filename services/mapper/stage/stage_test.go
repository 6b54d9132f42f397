package stage

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestCompletionCarriesTheBodyOnce: the completed event holds the upstream
// body once (response.rawResponseJson) and the sources once
// (response.sources), whether the answer is native, an upstream error or
// rewritten by tool emulation (whose rewrite stays in llm.body for the
// gateway's output items); it is a version 2 document.
func TestCompletionCarriesTheBodyOnce(t *testing.T) {
	const marker = "UPSTREAM-BODY-MARKER"
	// The marker is in a field no mapping reads: it is in the event only
	// as often as the body is.
	native := `{"id":"resp_1","x":"` + marker + `","status":"completed","model":"m","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":3,"output_tokens":2}}`
	errBody := `{"x":"` + marker + `","error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	verbatim := `{"id":"resp_2","x":"` + marker + `","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>"}]}]}`
	rewritten := `{"id":"resp_2","x":"` + marker + `","status":"completed","output":[{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}]}`
	sources := []contracts.SourceRef{{Id: "ck_SOURCE", Path: "a.go"}}
	cases := []struct {
		name     string
		llm      contracts.LLMResult
		kind     string
		llmBody  string // what llm.body keeps
		markers  int    // how often the marker appears in the event
		rawEqual string
	}{
		{"native", contracts.LLMResult{Status: 200, Body: native}, contracts.KindOK, "", 1, native},
		{"upstream error", contracts.LLMResult{Status: 400, Body: errBody, Error: &contracts.UpstreamError{Status: 400, Message: "HTTP 400"}}, contracts.KindError, "", 1, errBody},
		// The rewrite and the verbatim body differ (function_call items
		// for the blocks): each once; the verbatim copy in upstreamBody goes.
		{"tool emulation", contracts.LLMResult{Status: 200, Body: rewritten, UpstreamBody: verbatim}, contracts.KindToolOnly, rewritten, 2, verbatim},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			llm := tc.llm
			turn := contracts.Turn{Version: 1, ConversationId: "c", TurnId: "t", Request: contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t"},
				Retrieval: &contracts.Retrieval{Query: "q"},
				Envelope:  &contracts.Envelope{Backend: "b", Model: "m", Sources: sources}, LLM: &llm}
			if llm.UpstreamBody != "" {
				turn.Envelope.ToolEmulation = &contracts.ToolEmulation{Tools: json.RawMessage(`[{"type":"function","name":"f"}]`)}
			}
			(&Mapper{}).mapTurn(&turn)
			r := turn.Response
			if r.Kind != tc.kind || r.RawResponseJson != tc.rawEqual {
				t.Fatalf("kind %s, rawResponseJson %q", r.Kind, r.RawResponseJson)
			}
			if turn.LLM.Body != tc.llmBody || turn.LLM.UpstreamBody != "" {
				t.Errorf("llm.body %q, llm.upstreamBody %q: the body again", turn.LLM.Body, turn.LLM.UpstreamBody)
			}
			if turn.ResultBody() != tc.llm.Body {
				t.Errorf("ResultBody %q, want the body the mapping read", turn.ResultBody())
			}
			if len(r.Sources) != 1 || len(turn.Envelope.Sources) != 0 || turn.Envelope.ToolEmulation != nil {
				t.Errorf("sources: response %d, envelope %d; emulated tools %v", len(r.Sources), len(turn.Envelope.Sources), turn.Envelope.ToolEmulation)
			}
			if turn.Version != contracts.TurnVersion || contracts.TurnVersion < 2 {
				t.Errorf("version %d", turn.Version)
			}
			b, err := json.Marshal(turn)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), marker); n != tc.markers {
				t.Errorf("the body's text is %d times in the completed event, want %d: %s", n, tc.markers, b)
			}
			if n := strings.Count(string(b), "ck_SOURCE"); n != 1 {
				t.Errorf("the sources are %d times in the completed event", n)
			}
		})
	}
}
