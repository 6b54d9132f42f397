package sandbox_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

func messagesURL(t *testing.T) string {
	t.Helper()
	hs := httptest.NewServer(sandbox.New(sandbox.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(hs.Close)
	return hs.URL + "/v1/messages"
}

func postMessages(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMessagesEndpoint: the sandbox answers Messages requests as
// Anthropic does, and checks what Anthropic checks.
func TestMessagesEndpoint(t *testing.T) {
	url := messagesURL(t)
	thought := "The sandbox considers it."
	sig := sandbox.Signature(thought)
	for _, c := range []struct {
		name, body string
		status     int
		want       []string
	}{
		{"text", `{"model":"sandbox-1","max_tokens":100,"system":"Be terse.","messages":[{"role":"user","content":"Explain retries"}]}`, 200,
			[]string{`"type":"message"`, `"stop_reason":"end_turn"`, `"type":"text"`, `"cache_read_input_tokens":0`}},
		{"thinking first, signed", `{"model":"sandbox-1","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, 200,
			[]string{`"content":[{"signature":"sbx1.`, `"type":"thinking"`}},
		{"tool call", `{"model":"sandbox-1","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"[call:get_weather {\"city\":\"Paris\"}]"}]}`, 200,
			[]string{`"stop_reason":"tool_use"`, `"type":"tool_use"`, `"id":"toolu_`, `"input":{"city":"Paris"}`}},
		{"a signed thinking block comes back", `{"model":"sandbox-1","max_tokens":100,"messages":[{"role":"user","content":"a"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"` + thought + `","signature":"` + sig + `"},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`, 200,
			[]string{`"type":"message"`}},
		{"a changed signature is refused", `{"model":"sandbox-1","max_tokens":100,"messages":[{"role":"user","content":"a"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"` + thought + ` ","signature":"` + sig + `"}]},{"role":"user","content":"c"}]}`, 400,
			[]string{`"type":"invalid_request_error"`, "messages.1.content.0: Invalid `signature` in `thinking` block"}},
		{"max_tokens required", `{"model":"sandbox-1","messages":[{"role":"user","content":"a"}]}`, 400, []string{"max_tokens: Field required"}},
		{"a tool_result must answer a tool_use", `{"model":"sandbox-1","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"1"}]}]}`, 400,
			[]string{"unexpected `tool_use_id`"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := postMessages(t, url, c.body)
			if status != c.status {
				t.Fatalf("%d %s", status, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Fatalf("%s lacks %s", body, w)
				}
			}
		})
	}
}

// TestMessagesEndpointStream: Anthropic's event sequence, the thinking
// block first with its signature in a signature_delta.
func TestMessagesEndpointStream(t *testing.T) {
	status, body := postMessages(t, messagesURL(t), `{"model":"sandbox-1","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi there"}]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var names []string
	var sig string
	for _, line := range strings.Split(body, "\n") {
		if n, ok := strings.CutPrefix(line, "event: "); ok && (len(names) == 0 || names[len(names)-1] != n || n != "content_block_delta") {
			names = append(names, n)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "signature_delta") {
			var ev struct{ Delta struct{ Signature string } }
			_ = json.Unmarshal([]byte(d), &ev)
			sig = ev.Delta.Signature
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want || !strings.HasPrefix(sig, "sbx1.") {
		t.Fatalf("events %v, signature %q\n%s", names, sig, body)
	}
}
