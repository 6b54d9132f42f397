package chatcompletions

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// TestForward: a Chat Completions client's body goes as sent but for the
// routing (model) and the call's stream flags; the profile's ExtraBody and
// DropFields apply.
func TestForward(t *testing.T) {
	client := `{"model":"code-assistant","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],"stop":["\n"],"seed":7,"stream":true,"stream_options":{"include_usage":false},"store":true}`
	cases := []struct {
		name      string
		responses string
		q         profiles.Chat
		want      string
	}{
		{"streamed", `{"model":"gpt-x","stream":true,"input":[]}`, profiles.Chat{},
			`{"model":"gpt-x","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],"stop":["\n"],"seed":7,"stream":true,"stream_options":{"include_usage":true},"store":true}`},
		{"not streamed", `{"model":"gpt-x"}`, profiles.Chat{ExtraBody: map[string]json.RawMessage{"top_k": json.RawMessage("5")}, DropFields: []string{"store"}},
			`{"model":"gpt-x","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],"stop":["\n"],"seed":7,"top_k":5}`},
		{"quirks", `{"model":"gpt-x"}`, profiles.Chat{TokenLimitField: profiles.TokenLimitMaxTokens, FlattenText: true},
			`{"model":"gpt-x","messages":[{"role":"system","content":"Be terse."},{"role":"system","content":"a\n\nb"},{"role":"user","content":"hi"}],"max_tokens":9}`},
		{"no stream_options", `{"model":"gpt-x","stream":true}`, profiles.Chat{NoStreamOptions: true},
			`{"model":"gpt-x","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],"stop":["\n"],"seed":7,"stream":true,"store":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := client
			if tc.name == "quirks" {
				client = `{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"hi"}],"max_completion_tokens":9}`
			}
			got, err := Forward([]byte(client), []byte(tc.responses), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTransportForwards: with the client's body in the context the
// Transport sends it, not the translation of the Responses body.
func TestTransportForwards(t *testing.T) {
	var sent string
	tr := &Transport{Chat: profiles.Chat{DeveloperRole: true}, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		sent = string(b)
		body := `{"id":"c","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	})}
	ctx := WithClientBody(context.Background(), []byte(`{"model":"alias","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}],"seed":1}`))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://up/v1/responses", strings.NewReader(`{"model":"gpt-x","input":"translated"}`))
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp)
	}
	if want := `{"messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}],"model":"gpt-x","seed":1}`; sent != want {
		t.Fatalf("sent %s\nwant %s", sent, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
