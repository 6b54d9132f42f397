package messages

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("got  %s\nwant %s", gb, wb)
	}
}

// TestParse: a Messages request said as a Responses create, and what a
// backend other than Anthropic's cannot get named.
func TestParse(t *testing.T) {
	cases := []struct {
		name, in  string
		anthropic bool
		want      string
		ignored   string
	}{
		{"Claude Code's shape", `{"model":"claude-sonnet","max_tokens":32000,"stream":true,"metadata":{"user_id":"user_abc"},
			"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Env.","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"Bash","description":"Run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
			"thinking":{"type":"enabled","budget_tokens":31999},"temperature":1,
			"messages":[{"role":"user","content":[{"type":"text","text":"fix it","cache_control":{"type":"ephemeral"}}]}]}`, false,
			`{"store":false,"model":"claude-sonnet","max_output_tokens":32000,"stream":true,"user":"user_abc","temperature":1,
			  "reasoning":{"effort":"high"},
			  "tools":[{"type":"function","name":"Bash","description":"Run","parameters":{"type":"object"},"strict":false}],
			  "input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"You are Claude Code."},{"type":"input_text","text":"Env."}]},
			   {"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}]}`,
			"messages[].content[].cache_control, system[].cache_control, tools[].cache_control"},
		{"tool round trip and thinking to Anthropic", `{"model":"m","max_tokens":10,"top_k":5,"stop_sequences":["X"],
			"tool_choice":{"type":"any","disable_parallel_tool_use":true},"tools":[{"name":"f","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"go"},
			 {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a": 1}}]},
			 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"42"}],"is_error":true},{"type":"text","text":"and?"},
			  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}},{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, true,
			`{"store":false,"model":"m","max_output_tokens":10,"tool_choice":"required","parallel_tool_calls":false,
			  "tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false}],
			  "input":[{"type":"message","role":"user","content":"go"},
			   {"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"t"}],"encrypted_content":"s"},
			   {"type":"reasoning","summary":[],"content":[],"encrypted_content":"d","redacted":true},
			   {"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]},
			   {"type":"function_call","call_id":"toolu_1","name":"f","arguments":"{\"a\":1}"},
			   {"type":"function_call_output","call_id":"toolu_1","output":"42"},
			   {"type":"message","role":"user","content":[{"type":"input_text","text":"and?"},{"type":"input_image","image_url":"data:image/png;base64,AA","detail":"auto"},
			    {"type":"input_file","filename":"document.pdf","file_url":"https://x/a.pdf"}]}]}`,
			"messages[].content[].is_error, stop_sequences, top_k"},
		{"thinking to another backend", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`, false,
			`{"store":false,"model":"m","max_output_tokens":10,"input":[{"type":"message","role":"user","content":"a"},
			  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"b","annotations":[]}]},{"type":"message","role":"user","content":"c"}]}`,
			"messages[].content[].thinking"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, e := Parse([]byte(c.in), Options{Anthropic: c.anthropic})
			if e != nil {
				t.Fatal(e)
			}
			sameJSON(t, r.Create, c.want)
			if got := strings.Join(r.Ignored(), ", "); got != c.ignored {
				t.Fatalf("ignored %q, want %q", got, c.ignored)
			}
			if _, e := responses.Parse(r.Create); e != nil {
				t.Fatalf("the create does not parse: %v", e)
			}
		})
	}
}

// TestParseErrors: Anthropic's 400s, each naming its field.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[1]`, "not valid JSON"},
		{`{"model":"m","messages":[{"role":"user","content":"a"}]}`, "max_tokens: Field required"},
		{`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"a"}]}`, "max_tokens: Input should be greater than or equal to 1"},
		{`{"max_tokens":1,"messages":[{"role":"user","content":"a"}]}`, "model: Field required"},
		{`{"model":"m","max_tokens":1}`, "messages: Field required"},
		{`{"model":"m","max_tokens":1,"messages":[],"x":1}`, "x: Extra inputs are not permitted"},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b"}]}]}`, "messages.0.content.0.type"},
		{`{"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"a"}]}`, "tools.0.type"},
		{`{"model":"m","max_tokens":1,"tool_choice":{"type":"sometimes"},"messages":[{"role":"user","content":"a"}]}`, "tool_choice.type"},
	} {
		_, e := Parse([]byte(c.in), Options{})
		if e == nil || e.Status != 400 || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %v, want a 400 with %q", c.in, e, c.want)
		}
	}
}

func response(status string, incomplete string, items ...string) responses.Response {
	r := responses.Response{ID: "resp_0a", Model: "m", Status: status, Usage: &responses.Usage{InputTokens: 10, OutputTokens: 4, TotalTokens: 14,
		InputTokensDetails: responses.InputDetail{CachedTokens: 6}}}
	if incomplete != "" {
		r.IncompleteDetails = json.RawMessage(`{"reason":"` + incomplete + `"}`)
	}
	for _, it := range items {
		r.Output = append(r.Output, json.RawMessage(it))
	}
	return r
}

const (
	thinkingItem = `{"id":"rs_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}],"encrypted_content":"SIG"}`
	foreignItem  = `{"id":"rs_2","type":"reasoning","summary":[{"type":"summary_text","text":"x"}]}`
	textItem     = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}`
	callItem     = `{"id":"fc_1","type":"function_call","call_id":"toolu_1","name":"f","arguments":"{\"a\":1}"}`
)

// TestFromResponse: the answer's blocks, stop_reason and usage.
func TestFromResponse(t *testing.T) {
	for _, c := range []struct {
		r    responses.Response
		want string
	}{
		{response("completed", "", thinkingItem, foreignItem, textItem, callItem),
			`{"id":"msg_0a","type":"message","role":"assistant","model":"m","content":[{"type":"thinking","thinking":"hmm","signature":"SIG"},{"type":"text","text":"Hi"},
			  {"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}],"stop_reason":"tool_use","stop_sequence":null,
			  "usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":6,"output_tokens":4}}`},
		{response("completed", "", `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}],"stop_sequence":"END"}`),
			`{"id":"msg_0a","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi"}],"stop_reason":"stop_sequence","stop_sequence":"END",
			  "usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":6,"output_tokens":4}}`},
		{response("incomplete", "max_output_tokens", textItem),
			`{"id":"msg_0a","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi"}],"stop_reason":"max_tokens","stop_sequence":null,
			  "usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":6,"output_tokens":4}}`},
	} {
		b, _ := json.Marshal(FromResponse(c.r))
		sameJSON(t, b, c.want)
	}
}

// TestErrorBody: Anthropic's types and statuses.
func TestErrorBody(t *testing.T) {
	for _, c := range []struct {
		in, out int
		typ     string
	}{{400, 400, "invalid_request_error"}, {401, 401, "authentication_error"}, {403, 403, "permission_error"}, {404, 404, "not_found_error"},
		{413, 413, "request_too_large"}, {429, 429, "rate_limit_error"}, {503, 529, "overloaded_error"}, {529, 529, "overloaded_error"},
		{504, 504, "timeout_error"}, {500, 500, "api_error"}, {502, 502, "api_error"}} {
		status, body := ErrorBody(&responses.Error{Status: c.in, Message: "m"})
		b, _ := json.Marshal(body)
		if status != c.out || string(b) != `{"error":{"message":"m","type":"`+c.typ+`"},"type":"error"}` {
			t.Errorf("%d: %d %s", c.in, status, b)
		}
	}
}

func names(evs []Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return strings.Join(out, " ")
}

// TestStreamer: live text and tool input stream as they come; thinking,
// which the turn does not stream, comes first from the whole answer when
// the request held the stream; message_delta carries the stop reason.
func TestStreamer(t *testing.T) {
	live := []responses.Event{
		{Type: "response.output_text.delta", Data: map[string]any{"item_id": "msg_1", "delta": "H"}},
		{Type: "response.output_text.delta", Data: map[string]any{"item_id": "msg_1", "delta": "i"}},
		{Type: "response.output_item.added", Data: map[string]any{"item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": "toolu_1", "name": "f"}}},
		{Type: "response.function_call_arguments.delta", Data: map[string]any{"item_id": "fc_1", "delta": `{"a":1}`}},
		{Type: "response.completed", Data: map[string]any{"response": response("completed", "", textItem, callItem)}},
	}
	s := NewStreamer("resp_0a", "m", false)
	out, end := s.Events(live)
	if !end || names(out) != "content_block_start content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("live: %v %s", end, names(out))
	}
	held := []responses.Event{live[0], {Type: "response.completed", Data: map[string]any{"response": response("completed", "", thinkingItem, textItem)}}}
	s = NewStreamer("resp_0a", "m", true)
	out, _ = s.Events(held)
	if names(out) != "content_block_start content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("held: %s", names(out))
	}
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), `"signature":"SIG","type":"signature_delta"`) || !strings.Contains(string(b), `"stop_reason":"end_turn"`) {
		t.Fatalf("held: %s", b)
	}
	s = NewStreamer("resp_0a", "m", false)
	failed := response("failed", "")
	failed.Error = &responses.ResponseError{Code: "upstream", Message: "boom"}
	if out, _ := s.Events([]responses.Event{{Type: "response.failed", Data: map[string]any{"response": failed}}}); names(out) != "error" {
		t.Fatalf("failed: %s", names(out))
	}
}
