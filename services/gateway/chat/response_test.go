package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

func resp(status, incomplete string, output ...string) responses.Response {
	r := responses.Response{ID: "resp_0190abc", Object: "response", CreatedAt: 1700000000, Model: "m", Status: status,
		Usage: &responses.Usage{InputTokens: 11, OutputTokens: 5, TotalTokens: 16,
			InputTokensDetails: responses.InputDetail{CachedTokens: 2}, OutputTokensDetails: responses.OutputDetail{ReasoningTokens: 3}}}
	if incomplete != "" {
		r.IncompleteDetails = json.RawMessage(`{"reason":"` + incomplete + `"}`)
	}
	for _, o := range output {
		r.Output = append(r.Output, json.RawMessage(o))
	}
	return r
}

const (
	textItem      = `{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello","annotations":[]}]}`
	callItem      = `{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`
	refusalItem   = `{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]}`
	reasoningItem = `{"id":"rs_1","type":"reasoning","summary":[]}`
)

// TestFromResponse: the chat.completion of a response, per kind of ending.
func TestFromResponse(t *testing.T) {
	cases := []struct {
		name string
		r    responses.Response
		want string
	}{
		{"text", resp("completed", "", reasoningItem, textItem),
			`{"id":"chatcmpl-0190abc","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":3}}}`},
		{"tool calls", resp("completed", "", callItem),
			`{"id":"chatcmpl-0190abc","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls","logprobs":null}],"usage":{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":3}}}`},
		{"length", resp("incomplete", "max_output_tokens", textItem), `"finish_reason":"length"`},
		{"content_filter", resp("incomplete", "content_filter"), `"finish_reason":"content_filter"`},
		{"refusal", resp("completed", "", refusalItem), `"message":{"role":"assistant","content":null,"refusal":"I can't."},"finish_reason":"stop"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(FromResponse(tc.r))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// TestFailed: a failed response is an error in OpenAI's shape with its
// code; a completed one is not.
func TestFailed(t *testing.T) {
	r := resp("failed", "")
	r.Error = &responses.ResponseError{Code: "upstream_error", Message: "boom"}
	e := Failed(r)
	if e == nil || e.Status != 500 || *e.Code != "upstream_error" || e.Message != "boom" {
		t.Fatalf("%+v", e)
	}
	if Failed(resp("completed", "")) != nil || Failed(resp("incomplete", "max_output_tokens")) != nil {
		t.Fatal("an answer is not an error")
	}
	if e := Failed(resp("cancelled", "")); e == nil || e.Status != 499 {
		t.Fatalf("cancelled: %+v", e)
	}
}
