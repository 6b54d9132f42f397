package chatcompletions

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// sameJSON compares two JSON texts by value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The AGN-003 user message: [MODE]/[INSTRUCTION] and the AGN-002 block as
// two parts, the block exactly as rendered.
const ctxBlock = "[CONTEXT]\n=== CHUNK 1 ===\nId: ck_1\nPath: a.go\nLines: 1-3\nLanguage: go\n```go\nfunc A() {}\n```"

// TestRequestTable: hand-written Responses request → Chat Completions
// request pairs, one per rule of docs/backends.md.
func TestRequestTable(t *testing.T) {
	ctx, _ := json.Marshal(ctxBlock)
	for _, tc := range []struct {
		name string
		q    profiles.Chat
		in   string
		want string
	}{
		{
			name: "first turn: system prompt, user parts with the context block, tools, choice, limits, stream",
			in: `{"model":"qwen3","input":[
				{"type":"message","role":"system","content":[{"type":"input_text","text":"You are terse."}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: ANALYZE]\n\n[INSTRUCTION]\nExplain A"},{"type":"input_text","text":` + string(ctx) + `}]}],
				"tools":[{"type":"function","name":"lookup","description":"Find","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":true}],
				"tool_choice":{"type":"function","name":"lookup"},"parallel_tool_calls":false,
				"temperature":0.2,"top_p":0.9,"max_output_tokens":256,"stream":true,"store":true,"metadata":{"a":"b"}}`,
			want: `{"model":"qwen3","messages":[
				{"role":"system","content":"You are terse."},
				{"role":"user","content":[{"type":"text","text":"[MODE: ANALYZE]\n\n[INSTRUCTION]\nExplain A"},{"type":"text","text":` + string(ctx) + `}]}],
				"tools":[{"type":"function","function":{"name":"lookup","description":"Find","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":true}}],
				"tool_choice":{"type":"function","function":{"name":"lookup"}},"parallel_tool_calls":false,
				"temperature":0.2,"top_p":0.9,"max_completion_tokens":256,"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "instructions as developer where the profile says so; developer kept",
			q:    profiles.Chat{DeveloperRole: true, InstructionsRole: "developer"},
			in: `{"model":"m","instructions":"Tool calling instructions: …","input":[
				{"type":"message","role":"developer","content":"Be brief."},{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","messages":[{"role":"developer","content":"Tool calling instructions: …"},
				{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "developer becomes system without the quirk; string input",
			in:   `{"model":"m","instructions":"Rules.","input":"hello"}`,
			want: `{"model":"m","messages":[{"role":"system","content":"Rules."},{"role":"user","content":"hello"}]}`,
		},
		{
			name: "replayed continuation: text with parallel calls, outputs in order, a new user message",
			in: `{"model":"m","input":[
				{"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},
				{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Checking.","annotations":[]}]},
				{"type":"function_call","id":"fc_1","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
				{"type":"function_call","id":"fc_2","call_id":"call_b","name":"weather","arguments":{"city":"Rome"}},
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"function_call_output","call_id":"call_a","output":"3 C"},
				{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"18 C"}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"thanks"}]}],
				"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}`,
			want: `{"model":"m","messages":[
				{"role":"user","content":"weather?"},
				{"role":"assistant","content":"Checking.","tool_calls":[
					{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}},
					{"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
				{"role":"tool","tool_call_id":"call_a","content":"3 C"},
				{"role":"tool","tool_call_id":"call_b","content":"18 C"},
				{"role":"user","content":"thanks"}],
				"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}`,
		},
		{
			name: "a call without text: null content; an output for an unknown id goes as a user message",
			in: `{"model":"m","input":[{"role":"user","content":"go"},
				{"type":"function_call","call_id":"call_1","name":"ping","arguments":""},
				{"type":"function_call_output","call_id":"call_1","output":"pong"},
				{"type":"function_call_output","call_id":"call_zz","output":"orphan"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ping","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"pong"},
				{"role":"user","content":"Output of tool call call_zz:\norphan"}]}`,
		},
		{
			name: "multi-part user content: text, image (data URL, detail), file, audio; null content",
			in: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"look"},
				{"type":"input_image","image_url":"data:image/png;base64,AAA","detail":"low"},
				{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,BBB"},
				{"type":"input_audio","input_audio":{"data":"CCC","format":"wav"}}]},
				{"role":"assistant","content":null}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA","detail":"low"}},
				{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,BBB"}},
				{"type":"input_audio","input_audio":{"data":"CCC","format":"wav"}}]},
				{"role":"assistant","content":""}]}`,
		},
		{
			name: "flattenText: text parts as one string joined by a blank line; assistant refusal",
			q:    profiles.Chat{FlattenText: true},
			in: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"[CONTEXT]\nb"}]},
				{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"a\n\n[CONTEXT]\nb"},{"role":"assistant","content":null,"refusal":"no"}]}`,
		},
		{
			name: "json_schema, reasoning effort, stop, seed, user, safety_identifier, logprobs, verbosity, passthrough",
			in: `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true},"verbosity":"low"},
				"reasoning":{"effort":"high","summary":"auto"},"stop":["END"],"seed":7,"user":"u1","safety_identifier":"s1",
				"top_logprobs":2,"top_k":40,"truncation":"auto","include":["x"],"max_tool_calls":3,"prompt_cache_key":"k"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],
				"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},"verbosity":"low",
				"reasoning_effort":"high","stop":["END"],"seed":7,"user":"u1","safety_identifier":"s1",
				"logprobs":true,"top_logprobs":2,"top_k":40,"prompt_cache_key":"k"}`,
		},
		{
			name: "json_object; max_tokens field; no tools: tool_choice and parallel_tool_calls not sent",
			q:    profiles.Chat{TokenLimitField: profiles.TokenLimitMaxTokens},
			in:   `{"model":"m","input":"x","text":{"format":{"type":"json_object"}},"max_output_tokens":9,"tool_choice":"auto","parallel_tool_calls":true}`,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"max_tokens":9}`,
		},
		{
			name: "stream without stream_options; extra body wins; dropped fields; required and allowed_tools",
			q: profiles.Chat{NoStreamOptions: true, DropFields: []string{"seed"},
				ExtraBody: map[string]json.RawMessage{"provider": json.RawMessage(`{"sort":"price"}`), "temperature": json.RawMessage(`0`)}},
			in: `{"model":"m","input":"x","stream":true,"seed":1,"temperature":1,"tools":[{"type":"function","name":"f"}],
				"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"}]}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"temperature":0,"provider":{"sort":"price"},
				"tools":[{"type":"function","function":{"name":"f"}}],
				"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}}]}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Request([]byte(tc.in), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, tc.want)
		})
	}
}

// TestRequestRefusals: what Chat Completions cannot say is a clear 400-style
// error naming the field, never silently dropped.
func TestRequestRefusals(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"x","background":true}`, "background"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}`, "input[0].content[0]"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"file_search"}}`, "tool_choice.type"},
		{`{"model":"m","input":"x","text":{"format":{"type":"grammar"}}}`, "text.format.type"},
		{`{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
	} {
		_, err := Request([]byte(tc.in), profiles.Chat{})
		var re *RequestError
		if !errors.As(err, &re) || re.Param != tc.param || re.Message == "" {
			t.Errorf("%s: got %v, want an error on %s", tc.in, err, tc.param)
		}
	}
}
