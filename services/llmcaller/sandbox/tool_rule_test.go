package sandbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// fcall is a function_call output item as the tests read it.
type fcall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type rawResp struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Output []json.RawMessage `json:"output"`
}

func (r rawResp) calls(t *testing.T) []fcall {
	t.Helper()
	var out []fcall
	for _, raw := range r.Output {
		var c fcall
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		if c.Type == "function_call" {
			out = append(out, c)
		}
	}
	return out
}

func (r rawResp) text(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, raw := range r.Output {
		var m struct {
			Type    string                  `json:"type"`
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		for _, c := range m.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func postOK(t *testing.T, url, body string) rawResp {
	t.Helper()
	resp, b, err := post(t, url, body, "")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %v err %v body %s", resp, err, b)
	}
	var r rawResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

const weatherTools = `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"type":"function","name":"get_time","parameters":{"type":"object"}}]`

// A user text with two markers yields two function_call items (parallel
// calls) with the marker's arguments and deterministic call ids; sending both
// outputs back (previous_response_id) yields a text quoting each output.
func TestToolRuleParallelCallsThenOutputsByPreviousResponseID(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	user := `Plan the trip [call:get_weather {"city": "Paris"}] and [call:get_time {"tz":"CET"}] please`
	first := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"input":`+quoteJSON(user)+`}`)
	calls := first.calls(t)
	if len(calls) != 2 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris"}` ||
		calls[1].Name != "get_time" || calls[1].Arguments != `{"tz":"CET"}` || calls[0].Status != "completed" {
		t.Fatalf("calls %+v", calls)
	}
	if calls[0].CallID == calls[1].CallID || !strings.HasPrefix(calls[0].CallID, "call_") || !strings.HasPrefix(calls[0].ID, "fc_") {
		t.Fatalf("ids %+v", calls)
	}
	again := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"input":`+quoteJSON(user)+`}`)
	if again.calls(t)[0].CallID != calls[0].CallID {
		t.Fatalf("call_id not deterministic: %s vs %s", again.calls(t)[0].CallID, calls[0].CallID)
	}

	// Only one output: the other call is still pending and is emitted again, alone.
	one := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"previous_response_id":"`+first.ID+`","input":[`+
		`{"type":"function_call_output","call_id":"`+calls[0].CallID+`","output":"18C and sunny"}]}`)
	if c := one.calls(t); len(c) != 1 || c[0].CallID != calls[1].CallID {
		t.Fatalf("after one output want only get_time again, got %+v", c)
	}

	both := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"previous_response_id":"`+first.ID+`","input":[`+
		`{"type":"function_call_output","call_id":"`+calls[0].CallID+`","output":"18C and sunny"},`+
		`{"type":"function_call_output","call_id":"`+calls[1].CallID+`","output":"{\"time\":\"09:00\"}"}]}`)
	if len(both.calls(t)) != 0 {
		t.Fatalf("all outputs present, want text, got calls %+v", both.calls(t))
	}
	want := `Sandbox reply (mode unspecified) to: ` + user + `. Context chunks: none. Continuing from ` + first.ID + `.` +
		` Tool get_weather (` + calls[0].CallID + `) returned "18C and sunny".` +
		` Tool get_time (` + calls[1].CallID + `) returned "{\"time\":\"09:00\"}".`
	if got := both.text(t); got != want {
		t.Fatalf("text\n got %s\nwant %s", got, want)
	}
}

// The same loop by replaying the items (no previous_response_id) reaches
// the same calls and the same answer.
func TestToolRuleByExplicitHistory(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	userItem := `{"type":"message","role":"user","content":[{"type":"input_text","text":"[call:get_weather {\"city\":\"Oslo\"}]"}]}`
	first := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"input":[`+userItem+`]}`)
	calls := first.calls(t)
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	fc, _ := json.Marshal(calls[0])
	second := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"input":[`+userItem+`,`+string(fc)+
		`,{"type":"function_call_output","call_id":"`+calls[0].CallID+`","output":"-3C"}]}`)
	if len(second.calls(t)) != 0 || !strings.HasSuffix(second.text(t), ` Tool get_weather (`+calls[0].CallID+`) returned "-3C".`) {
		t.Fatalf("second: calls %+v text %q", second.calls(t), second.text(t))
	}
	// A new user turn with the same marker is a new call.
	third := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"previous_response_id":"`+second.ID+`","input":[`+userItem+`]}`)
	if c := third.calls(t); len(c) != 1 || c[0].CallID == calls[0].CallID {
		t.Fatalf("a later turn's marker must get a new call_id: %+v", c)
	}
}

func TestToolRuleRespectsChoiceAndParallelFlag(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	user := quoteJSON(`[call:get_weather {"city":"Rome"}] [call:get_time]`)
	none := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"tool_choice":"none","input":`+user+`}`)
	if len(none.calls(t)) != 0 || none.text(t) == "" {
		t.Fatalf("tool_choice none: %+v", none.Output)
	}
	serial := postOK(t, ts.URL, `{"model":"m",`+weatherTools+`,"parallel_tool_calls":false,"input":`+user+`}`)
	if c := serial.calls(t); len(c) != 1 || c[0].Name != "get_weather" {
		t.Fatalf("parallel_tool_calls false: %+v", c)
	}
	malformed := postOK(t, ts.URL, `{"model":"m","input":"[call:get_weather {oops] [call:]"}`)
	if len(malformed.calls(t)) != 0 {
		t.Fatalf("malformed markers must stay text: %+v", malformed.calls(t))
	}
}

// Streaming: the SDK sees each call's item.added, argument deltas and done
// events, and its accumulated final response holds both calls.
func TestToolRuleStreaming(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{})
	p := params(userMessage(`[call:get_weather {"city":"Lima"}][call:get_time {}]`))
	p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}
	stream := client.Responses.NewStreaming(context.Background(), p)
	defer stream.Close()
	args := map[string]*strings.Builder{}
	var final responses.Response
	for stream.Next() {
		switch e := stream.Current().AsAny().(type) {
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			if args[e.ItemID] == nil {
				args[e.ItemID] = &strings.Builder{}
			}
			args[e.ItemID].WriteString(e.Delta)
		case responses.ResponseCompletedEvent:
			final = e.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(final.Output) != 2 {
		t.Fatalf("final output %+v", final.Output)
	}
	for i, want := range []string{`{"city":"Lima"}`, `{}`} {
		fc := final.Output[i].AsFunctionCall()
		if fc.Arguments != want || args[fc.ID] == nil || args[fc.ID].String() != want {
			t.Fatalf("call %d: %+v deltas %v", i, fc, args)
		}
	}
	if final.ParallelToolCalls != true || final.Tools[0].AsFunction().Strict != false {
		t.Fatalf("echo: parallel %v tools %+v", final.ParallelToolCalls, final.Tools)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A marker inside the AGN-002 context block (retrieved code) is not a call.
func TestToolRuleIgnoresContextBlocks(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	ctx := "[CONTEXT]\n\n=== CHUNK 1 ===\nId: c1\nPath: a_test.go\nLines: 1-1\nLanguage: go\n```go\n// [call:get_weather {\"city\":\"Paris\"}]\n```"
	body, _ := json.Marshal(map[string]any{"model": "m", "input": []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "[MODE: ASK]\n\n[INSTRUCTION]\nExplain the test"},
		map[string]any{"type": "input_text", "text": ctx}}}}})
	r := postOK(t, ts.URL, string(body))
	if len(r.calls(t)) != 0 || r.text(t) != "Sandbox reply (mode ASK) to: Explain the test. Context chunks: c1." {
		t.Fatalf("calls %+v text %q", r.calls(t), r.text(t))
	}
}
