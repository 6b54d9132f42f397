package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestParseTranslates: each chat request says the Responses create
// request it means, which the gateway's own Responses parser accepts.
func TestParseTranslates(t *testing.T) {
	cases := []struct {
		name string
		body string
		want string // the Responses create body
	}{
		{"minimal",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"input":[{"type":"message","role":"user","content":"hi"}],"model":"m","store":false}`},
		{"system and developer stay messages, not instructions",
			`{"messages":[{"role":"system","content":"Be terse."},{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"hi"}]}`,
			`{"input":[{"type":"message","role":"system","content":"Be terse."},{"type":"message","role":"developer","content":"a\nb"},{"type":"message","role":"user","content":"hi"}],"store":false}`},
		{"user parts and image_url",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`,
			`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"},{"type":"input_image","image_url":"data:image/png;base64,AA","detail":"auto"}]}],"store":false}`},
		{"a tool round trip",
			`{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"18 C"}],
			  "tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}`,
			`{"input":[{"type":"message","role":"user","content":"weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"18 C"}],
			  "parallel_tool_calls":false,"store":false,"tool_choice":{"name":"get_weather","type":"function"},"tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object"},"strict":true}]}`},
		{"assistant text beside its calls, refusal, tool parts",
			`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"ok"}]},{"role":"assistant","content":null,"refusal":"no"}]}`,
			`{"input":[{"type":"message","role":"user","content":"x"},{"type":"message","role":"assistant","content":"Let me look."},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"no"}]}],"store":false}`},
		{"sampling, limits and formats",
			`{"messages":[{"role":"user","content":"x"}],"temperature":0.2,"top_p":0.9,"max_tokens":50,"max_completion_tokens":40,"user":"u1","reasoning_effort":"low","metadata":{"k":"v"},
			  "response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},"stream":true,"stream_options":{"include_usage":true},"n":1}`,
			`{"input":[{"type":"message","role":"user","content":"x"}],"max_output_tokens":40,"metadata":{"k":"v"},"reasoning":{"effort":"low"},"store":false,"stream":true,"temperature":0.2,
			  "text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true}},"top_p":0.9,"user":"u1"}`},
		{"json_object and max_tokens alone",
			`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"max_tokens":7,"tool_choice":"required"}`,
			`{"input":[{"type":"message","role":"user","content":"x"}],"max_output_tokens":7,"store":false,"text":{"format":{"type":"json_object"}},"tool_choice":"required"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Parse([]byte(tc.body))
			if e != nil {
				t.Fatal(e)
			}
			var got, want any
			if err := json.Unmarshal(r.Create, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("create body\n got %s\nwant %s", r.Create, tc.want)
			}
			if string(r.Body) != tc.body {
				t.Fatal("the body as sent is not kept")
			}
			if _, e := responses.Parse(r.Create); e != nil {
				t.Fatalf("the Responses parser refuses the translation: %v", e)
			}
		})
	}
}

// TestParseCarries: stream flags, and the parameters with no Responses
// equivalent kept for a Chat Completions backend and named for a
// Responses one.
func TestParseCarries(t *testing.T) {
	r, e := Parse([]byte(`{"model":"m","messages":[{"role":"user","name":"ann","content":"hi"}],"stop":["\n"],"seed":7,"logit_bias":null,"stream":true,"stream_options":{"include_usage":true}}`))
	if e != nil {
		t.Fatal(e)
	}
	if !r.Stream || !r.IncludeUsage || r.Model != "m" {
		t.Fatalf("%+v", r)
	}
	if string(r.ChatOnly["stop"]) != `["\n"]` || string(r.ChatOnly["seed"]) != "7" || len(r.ChatOnly) != 2 {
		t.Fatalf("chat-only %v", r.ChatOnly)
	}
	if got := strings.Join(r.IgnoredOnResponses(), ","); got != "messages[].name,seed,stop" {
		t.Fatalf("ignored on a Responses backend: %s", got)
	}
	if r, _ := Parse([]byte(`{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`)); r.IncludeUsage {
		t.Fatal("include_usage without stream")
	}
}

// TestParseErrors: OpenAI's 400s, each naming the parameter.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, body, param, code, says string
	}{
		{"not JSON", "{\"messages\": [\n  {\"role\": }]}", "", responses.CodeInvalidJSON, "position 26 (line 2, column 12)"},
		{"not an object", `[1]`, "", responses.CodeInvalidJSON, "must be a JSON object"},
		{"unknown parameter", `{"messages":[{"role":"user","content":"x"}],"bogus":1}`, "bogus", responses.CodeUnknownParameter, "Unrecognized request argument supplied: bogus"},
		{"n > 1", `{"messages":[{"role":"user","content":"x"}],"n":3}`, "n", responses.CodeInvalidValue, "one choice per request"},
		{"functions", `{"messages":[{"role":"user","content":"x"}],"functions":[]}`, "functions", responses.CodeUnknownParameter, "send 'tools'"},
		{"no messages", `{"model":"m"}`, "messages", responses.CodeMissingParameter, "'messages'"},
		{"empty messages", `{"messages":[]}`, "messages", responses.CodeInvalidValue, "empty array"},
		{"bad role", `{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role", responses.CodeInvalidValue, "'function'"},
		{"no role", `{"messages":[{"content":"x"}]}`, "messages[0].role", responses.CodeMissingParameter, "messages[0].role"},
		{"tool without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", responses.CodeMissingParameter, "tool_call_id"},
		{"bad part", `{"messages":[{"role":"user","content":[{"type":"video","video":{}}]}]}`, "messages[0].content[0].type", responses.CodeInvalidValue, "'video'"},
		{"image part in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type", responses.CodeInvalidValue, "text parts only"},
		{"wrong type", `{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}`, "max_tokens", responses.CodeInvalidType, "an integer"},
		{"zero max", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0}`, "max_completion_tokens", responses.CodeInvalidValue, "minimum value 1"},
		{"tool type", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{}}]}`, "tools[0].type", responses.CodeInvalidValue, "'custom'"},
		{"tool name", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", responses.CodeMissingParameter, "function.name"},
		{"tool_choice", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"always"}`, "tool_choice", responses.CodeInvalidValue, "'always'"},
		{"response_format", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}`, "response_format.type", responses.CodeInvalidValue, "'yaml'"},
		{"json_schema without name", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name", responses.CodeMissingParameter, "name"},
		{"call without id", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id", responses.CodeMissingParameter, "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, e := Parse([]byte(tc.body))
			if e == nil {
				t.Fatal("accepted")
			}
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if e.Status != 400 || e.Type != responses.TypeInvalidRequest || param != tc.param || e.Code == nil || *e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("got %d %s param %q code %v: %s", e.Status, e.Type, param, *e.Code, e.Message)
			}
		})
	}
}
