package chatcompletions

import (
	"encoding/json"
	"regexp"
	"testing"
)

// ids are random per response: the tables name them by placeholder.
var idPattern = regexp.MustCompile(`"(resp|msg|rs|fc)_[0-9a-f]{24}(_\d+)?"`)
var callPattern = regexp.MustCompile(`"call_[0-9a-f]{24}_(\d+)"`)

func normalizeIDs(b []byte) []byte {
	b = idPattern.ReplaceAll(b, []byte(`"${1}_X${2}"`))
	return callPattern.ReplaceAll(b, []byte(`"call_X_${1}"`))
}

// TestResponseTable: hand-written Chat Completions reply → Responses body
// pairs, the awkward ones included.
func TestResponseTable(t *testing.T) {
	const head = `"object":"response","created_at":1700000000,"error":null,"model":"qwen3","chat_completion_id":"chatcmpl-1"`
	for _, tc := range []struct{ name, in, want string }{
		{
			name: "text, usage with cached and reasoning details",
			in: `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"qwen3","choices":[{"index":0,
				"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}`,
			want: `{"id":"resp_X",` + head + `,"status":"completed","incomplete_details":null,
				"output":[{"id":"msg_X","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello.","annotations":[],"logprobs":[]}]}],
				"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":13}}`,
		},
		{
			name: "empty content with parallel tool calls: ids kept, object arguments as a string, a missing id made, a reused id made unique",
			in: `{"id":"chatcmpl-1","created":1700000000,"model":"qwen3","choices":[{"message":{"role":"assistant","content":"",
				"tool_calls":[{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}},
				{"id":"call_a","type":"function","function":{"name":"weather","arguments":{"city":"Rome"}}},
				{"type":"function","function":{"name":"time","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
			want: `{"id":"resp_X",` + head + `,"status":"completed","incomplete_details":null,"output":[
				{"id":"fc_X_0","type":"function_call","status":"completed","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
				{"id":"fc_X_1","type":"function_call","status":"completed","call_id":"call_a_1","name":"weather","arguments":"{\"city\":\"Rome\"}"},
				{"id":"fc_X_2","type":"function_call","status":"completed","call_id":"call_X_2","name":"time","arguments":"{}"}],"usage":null}`,
		},
		{
			name: "null content with a tool call; reasoning_content as a reasoning item first",
			in: `{"id":"chatcmpl-1","created":1700000000,"model":"qwen3","choices":[{"message":{"role":"assistant","content":null,"reasoning_content":"think",
				"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_cache_hit_tokens":3}}`,
			want: `{"id":"resp_X",` + head + `,"status":"completed","incomplete_details":null,"output":[
				{"id":"rs_X","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
				{"id":"fc_X_0","type":"function_call","status":"completed","call_id":"call_1","name":"f","arguments":"{}"}],
				"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":3},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}`,
		},
		{
			name: "length: incomplete, max_output_tokens",
			in:   `{"id":"chatcmpl-1","created":1700000000,"model":"qwen3","choices":[{"message":{"content":"Hel"},"finish_reason":"length"}]}`,
			want: `{"id":"resp_X",` + head + `,"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
				"output":[{"id":"msg_X","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"Hel","annotations":[],"logprobs":[]}]}],"usage":null}`,
		},
		{
			name: "content_filter with a refusal",
			in:   `{"id":"chatcmpl-1","created":1700000000,"model":"qwen3","choices":[{"message":{"content":null,"refusal":"I can't."},"finish_reason":"content_filter"}]}`,
			want: `{"id":"resp_X",` + head + `,"status":"incomplete","incomplete_details":{"reason":"content_filter"},
				"output":[{"id":"msg_X","type":"message","status":"incomplete","role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]}],"usage":null}`,
		},
		{
			name: "null content, no calls, no finish_reason: completed and empty",
			in:   `{"id":"chatcmpl-1","created":1700000000,"model":"qwen3","choices":[{"message":{"content":null}}]}`,
			want: `{"id":"resp_X",` + head + `,"status":"completed","incomplete_details":null,"output":[],"usage":null}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Response([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, normalizeIDs(got), tc.want)
		})
	}
	if _, err := Response([]byte(`{"id":"x","choices":[]}`)); err == nil {
		t.Error("a reply without choices must be an error")
	}
}

// TestErrorBody: a 2xx body that is an error object is an error, with the
// status its code names (or 502).
func TestErrorBody(t *testing.T) {
	for body, want := range map[string]int{
		`{"error":{"message":"Rate limit exceeded","code":429}}`:                            429,
		`{"error":{"message":"overloaded","code":"503"}}`:                                   503,
		`{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_value"}}`: 502,
		`{"error":"upstream provider failed"}`:                                              502,
		`{"object":"error","message":"model not loaded","type":"NotFoundError","code":404}`: 404,
		`{"id":"c","choices":[{"message":{"content":"ok"}}],"error":null}`:                  0,
		`{"id":"c","choices":[{"message":{"content":"ok"}}]}`:                               0,
	} {
		status, isErr := ErrorBody([]byte(body))
		if status != want || isErr != (want != 0) {
			t.Errorf("%s: %d %v, want %d", body, status, isErr, want)
		}
	}
}

// TestResponseIsValidJSONForTheMapper: the body decodes as a Responses
// object with the fields the caller's summary reads.
func TestResponseIsValidJSONForTheMapper(t *testing.T) {
	out, err := Response([]byte(`{"id":"c","model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Usage  struct {
			Total int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Status != "completed" || r.Usage.Total != 2 || len(r.ID) < 10 {
		t.Fatalf("%s %v", out, err)
	}
}
