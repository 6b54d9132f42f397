package anthropicmessages

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// sameJSON compares two JSON documents by value.
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

// TestRequest: the Responses request said as Messages.
func TestRequest(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"string input, default max_tokens", `{"model":"claude-x","input":"hi"}`,
			`{"model":"claude-x","max_tokens":512,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"instructions and system messages, merged roles", `{"model":"m","instructions":"Be terse.","max_output_tokens":9,"temperature":0.5,"input":[
			{"type":"message","role":"developer","content":"Dev."},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]},
			{"type":"message","role":"user","content":"b"}]}`,
			`{"model":"m","max_tokens":9,"temperature":0.5,"system":[{"type":"text","text":"Be terse."},{"type":"text","text":"Dev."}],
			 "messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`},
		{"tools in order, thinking replayed", `{"model":"m","stream":true,"parallel_tool_calls":false,"tool_choice":"required",
			"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"}}],"input":[
			{"type":"message","role":"user","content":"go"},
			{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"<think> & go"}],"encrypted_content":"sig+/="},
			{"type":"reasoning","summary":[],"content":[],"encrypted_content":"opaque","redacted":true},
			{"type":"reasoning","summary":[{"type":"summary_text","text":"another model's"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},
			{"type":"function_call","call_id":"toolu_1","name":"f","arguments":"{\"x\":1}"},
			{"type":"function_call_output","call_id":"toolu_1","output":"42"},
			{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`,
			`{"model":"m","max_tokens":512,"stream":true,
			 "tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],
			 "tool_choice":{"type":"any","disable_parallel_tool_use":true},
			 "messages":[{"role":"user","content":[{"type":"text","text":"go"}]},
			  {"role":"assistant","content":[{"type":"thinking","thinking":"<think> & go","signature":"sig+/="},{"type":"redacted_thinking","data":"opaque"},
			   {"type":"text","text":"calling"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"x":1}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"42"},
			   {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`},
		{"reasoning effort as a thinking budget", `{"model":"m","max_output_tokens":4000,"reasoning":{"effort":"medium"},"user":"u1","input":"hi"}`,
			`{"model":"m","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":3999},"metadata":{"user_id":"u1"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Request([]byte(c.in), Defaults{MaxTokens: 512})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, c.want)
		})
	}
	if _, err := Request([]byte(`{"model":"m","tools":[{"type":"web_search"}],"input":"x"}`), Defaults{}); err == nil {
		t.Fatal("a web_search tool was translated")
	}
}

// TestResponse: a Messages answer as the Responses body, cache usage inside input_tokens.
func TestResponse(t *testing.T) {
	in := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","stop_reason":"max_tokens","content":[
		{"type":"thinking","thinking":"hmm <b>","signature":"s1"},{"type":"redacted_thinking","data":"r1"},
		{"type":"text","text":"Hi"},{"type":"tool_use","id":"toolu_1","name":"f","input":{ "a" : 1 }}],
		"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":3,"cache_read_input_tokens":2}}`
	got, err := Response([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var r responseBody
	_ = json.Unmarshal(got, &r)
	r.CreatedAt = 0
	b, _ := json.Marshal(r)
	sameJSON(t, b, `{"id":"resp_1","object":"response","created_at":0,"status":"incomplete","model":"claude-x","incomplete_details":{"reason":"max_output_tokens"},"error":null,
		"output":[{"id":"rs_1_0","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm <b>"}],"encrypted_content":"s1"},
		 {"id":"rs_1_1","type":"reasoning","summary":[],"content":[],"encrypted_content":"r1","redacted":true},
		 {"id":"msg_1_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}]},
		 {"id":"fc_1_3","type":"function_call","status":"completed","call_id":"toolu_1","name":"f","arguments":"{\"a\":1}"}],
		"usage":{"input_tokens":15,"input_tokens_details":{"cached_tokens":2,"cache_write_tokens":3},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":20}}`)
	if !strings.Contains(string(got), `"hmm <b>"`) {
		t.Fatalf("thinking re-escaped: %s", got)
	}
}

// TestStream: a Messages event stream as Responses events whose terminal
// response is what Response makes of the same message.
func TestStream(t *testing.T) {
	in := strings.Join([]string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":4,"output_tokens":1,"cache_read_input_tokens":1}}}`,
		`event: ping` + "\n" + `data: {"type":"ping"}`,
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a <"}}`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"b"}}`,
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG=="}}`,
		`data: {"type":"content_block_stop","index":0}`,
		`data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`,
		`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`,
		`data: {"type":"content_block_stop","index":1}`,
		`data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_9","name":"f","input":{}}}`,
		`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`data: {"type":"content_block_stop","index":2}`,
		`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`,
		`data: {"type":"message_stop"}`, ""}, "\n\n")
	var out strings.Builder
	if err := NewStream(&out).Translate(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	var types []string
	var final json.RawMessage
	for _, line := range strings.Split(out.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		_ = json.Unmarshal([]byte(data), &ev)
		types = append(types, ev.Type)
		final = ev.Response
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events %s\nwant   %s", got, want)
	}
	var r struct {
		Output []json.RawMessage `json:"output"`
		Usage  responsesUsage    `json:"usage"`
	}
	_ = json.Unmarshal(final, &r)
	if len(r.Output) != 3 || !strings.Contains(string(r.Output[0]), `"text":"a <b"`) || !strings.Contains(string(r.Output[0]), `"encrypted_content":"SIG=="`) ||
		!strings.Contains(string(r.Output[2]), `"arguments":"{\"a\":1}"`) || r.Usage.InputTokens != 5 || r.Usage.OutputTokens != 9 {
		t.Fatalf("final %s", final)
	}
	if err := NewStream(io.Discard).Translate(strings.NewReader(strings.SplitAfter(in, "message_delta")[0])); err == nil {
		t.Fatal("a stream cut before message_stop ended cleanly")
	}
}

// TestForward: a Messages client's body goes as sent but for model and
// stream; every member keeps its bytes (no HTML escaping, no reordering
// inside it; the top-level members come out sorted).
func TestForward(t *testing.T) {
	client := `{"model":"claude-alias","max_tokens":9,"stream":true,"messages":[{"role":"assistant","content":[{"signature":"a+b/c=","type":"thinking","thinking":"<&> \u00fc"}]}],"top_k":3}`
	got, err := Forward([]byte(client), []byte(`{"model":"claude-real","stream":false}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_tokens":9,"messages":[{"role":"assistant","content":[{"signature":"a+b/c=","type":"thinking","thinking":"<&> \u00fc"}]}],"model":"claude-real","top_k":3}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestTransport: the call goes to /messages with x-api-key and
// anthropic-version (the client's when it sent one, with its beta), the
// answer comes back as a Responses body; errors pass through as sent.
func TestTransport(t *testing.T) {
	var seen http.Header
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, path = r.Header.Clone(), r.URL.Path
		if strings.Contains(r.Header.Get("Anthropic-Beta"), "overload") {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(529)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_3","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &Transport{Anthropic: profiles.Anthropic{Version: "2023-06-01", MaxTokens: 100}}}
	call := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"model":"m","input":"hi"}`))
		req.Header.Set("Authorization", "Bearer k1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call(context.Background())
	b, _ := io.ReadAll(resp.Body)
	if path != "/v1/messages" || seen.Get("X-Api-Key") != "k1" || seen.Get("Authorization") != "" || seen.Get("Anthropic-Version") != "2023-06-01" ||
		!strings.Contains(string(b), `"output_text"`) {
		t.Fatalf("%s %v: %s", path, seen, b)
	}
	resp = call(WithClient(context.Background(), Client{Version: "2024-01-01", Beta: "overload-test"}))
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After") != "3" || seen.Get("Anthropic-Version") != "2024-01-01" || !strings.Contains(string(b), "overloaded_error") {
		t.Fatalf("%d %v: %s", resp.StatusCode, seen, b)
	}
}

// TestResponseStopSequence: the stop sequence rides on the last message item.
func TestResponseStopSequence(t *testing.T) {
	got, err := Response([]byte(`{"id":"msg_4","type":"message","model":"m","stop_reason":"stop_sequence","stop_sequence":"END",
		"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"usage":{"input_tokens":1,"output_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(got), `"stop_sequence":"END"`) != 1 || !strings.Contains(string(got), `"text":"b","annotations":[],"logprobs":[]}],"stop_sequence":"END"`) {
		t.Fatalf("%s", got)
	}
}
