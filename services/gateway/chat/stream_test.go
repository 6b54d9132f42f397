package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestStreamer: the Responses events of a streamed turn (made by the
// gateway's own responses.Streamer from live deltas and the final
// response) become chunks: role, content, tool call deltas, the finish
// reason, the usage chunk; an item only the final response has is shown
// too.
func TestStreamer(t *testing.T) {
	cases := []struct {
		name         string
		deltas       []responses.Delta
		final        responses.Response
		includeUsage bool
		want         []string
	}{
		{"text", []responses.Delta{{Type: "text", ItemID: "msg_1", Text: "Hel"}, {Type: "text", ItemID: "msg_1", Text: "lo"}},
			resp("completed", "", textItem), true,
			[]string{`{"role":"assistant","content":""}`, `{"content":"Hel"}`, `{"content":"lo"}`, `finish:stop`, `usage:16`}},
		{"tool call", []responses.Delta{{Type: "arguments", ItemID: "fc_1", CallID: "call_1", Name: "get_weather", Text: `{"city":`}, {Type: "arguments", ItemID: "fc_1", Text: `"Paris"}`}},
			resp("completed", "", callItem), false,
			[]string{`{"role":"assistant","content":""}`, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, `finish:tool_calls`}},
		{"not streamed live", nil, resp("incomplete", "max_output_tokens", textItem, callItem), false,
			[]string{`{"role":"assistant","content":""}`, `{"content":"Hello"}`, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, `finish:length`}},
		{"failed", nil, func() responses.Response {
			r := resp("failed", "")
			r.Error = &responses.ResponseError{Code: "upstream_error", Message: "boom"}
			return r
		}(), true, []string{`{"role":"assistant","content":""}`, `error:boom`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := responses.NewStreamer()
			cs := NewStreamer("resp_0190abc", "m", 1700000000, tc.includeUsage)
			got := []any{cs.Start()}
			evs := st.Start(responses.Response{ID: "resp_0190abc"})
			for _, d := range tc.deltas {
				evs = append(evs, st.Delta(d)...)
			}
			out, end := cs.Events(append(evs, st.Finish(tc.final)...))
			if !end {
				t.Fatal("no end")
			}
			got = append(got, out...)
			var seen []string
			for _, c := range got {
				switch c := c.(type) {
				case Chunk:
					if c.ID != "chatcmpl-0190abc" || c.Object != "chat.completion.chunk" || c.Model != "m" {
						t.Fatalf("chunk %+v", c)
					}
					switch {
					case c.Usage != nil:
						if len(c.Choices) != 0 {
							t.Fatal("the usage chunk has choices")
						}
						seen = append(seen, "usage:"+itoa(c.Usage.TotalTokens))
					case c.Choices[0].FinishReason != nil:
						seen = append(seen, "finish:"+*c.Choices[0].FinishReason)
					default:
						b, _ := json.Marshal(c.Choices[0].Delta)
						seen = append(seen, string(b))
					}
				default:
					b, _ := json.Marshal(c)
					var e struct {
						Error struct{ Message string } `json:"error"`
					}
					_ = json.Unmarshal(b, &e)
					seen = append(seen, "error:"+e.Error.Message)
				}
			}
			if strings.Join(seen, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
