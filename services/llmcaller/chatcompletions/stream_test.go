package chatcompletions

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

type event struct {
	Type string
	Raw  map[string]any
}

// translate runs a chat SSE text through Stream and parses the events.
func translate(t *testing.T, chatSSE string) ([]event, error) {
	t.Helper()
	var out bytes.Buffer
	err := NewStream(&out).Translate(strings.NewReader(chatSSE))
	var evs []event
	for _, block := range strings.Split(out.String(), "\n\n") {
		if block == "" {
			continue
		}
		lines := strings.SplitN(block, "\n", 2)
		typ := strings.TrimPrefix(lines[0], "event: ")
		var m map[string]any
		if jerr := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &m); jerr != nil {
			t.Fatalf("event %q: %v", block, jerr)
		}
		if m["type"] != typ {
			t.Fatalf("event line %q, type %v", typ, m["type"])
		}
		if int(m["sequence_number"].(float64)) != len(evs) {
			t.Fatalf("sequence number %v at %d", m["sequence_number"], len(evs))
		}
		evs = append(evs, event{Type: typ, Raw: m})
	}
	return evs, err
}

func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

func types(evs []event) string {
	var s []string
	for _, e := range evs {
		s = append(s, strings.TrimPrefix(e.Type, "response."))
	}
	return strings.Join(s, " ")
}

func deltas(evs []event, typ string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Raw["delta"].(string))
		}
	}
	return b.String()
}

func final(t *testing.T, evs []event) map[string]any {
	t.Helper()
	last := evs[len(evs)-1]
	r, ok := last.Raw["response"].(map[string]any)
	if !ok {
		t.Fatalf("last event %s has no response", last.Type)
	}
	return r
}

// TestStreamText: role chunk, content deltas, finish_reason, usage only in
// a last chunk with no choices, [DONE]: the Responses sequence, the text
// deltas, and the usage in response.completed.
func TestStreamText(t *testing.T) {
	evs, err := translate(t, ": keep-alive\n\n"+sse(
		`{"id":"chatcmpl-1","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":" world"}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`,
		`[DONE]`))
	if err != nil {
		t.Fatal(err)
	}
	want := "created in_progress output_item.added content_part.added output_text.delta output_text.delta output_text.done content_part.done output_item.done completed"
	if got := types(evs); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if d := deltas(evs, "response.output_text.delta"); d != "Hello world" {
		t.Fatalf("deltas %q", d)
	}
	r := final(t, evs)
	u := r["usage"].(map[string]any)
	if r["status"] != "completed" || u["input_tokens"] != 7.0 || u["total_tokens"] != 9.0 || r["model"] != "m" {
		t.Fatalf("final %v", r)
	}
	if id := evs[0].Raw["response"].(map[string]any)["id"]; id != r["id"] {
		t.Fatalf("created id %v, final id %v", id, r["id"])
	}
}

// TestStreamParallelToolCalls: fragments keyed by index, interleaved, the
// id and name only in each call's first fragment, a call whose name comes
// after its first argument fragment: each call's arguments add up, items
// keep the server's call ids, the final response has both calls.
func TestStreamParallelToolCalls(t *testing.T) {
	evs, err := translate(t, sse(
		`{"id":"c","model":"m","choices":[{"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}}]}`,
		`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"arguments":"{\"ci"}}]}}]}`,
		`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":1,"function":{"name":"weather","arguments":"ty\":\"Rome\"}"}}]}}]}`,
		`{"id":"c","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}}]}`,
		`{"id":"c","choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]string{}
	callOf := map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case "response.output_item.added":
			it := e.Raw["item"].(map[string]any)
			callOf[it["id"].(string)] = it["call_id"].(string)
		case "response.function_call_arguments.delta":
			args[callOf[e.Raw["item_id"].(string)]] += e.Raw["delta"].(string)
		}
	}
	if args["call_a"] != `{"city":"Oslo"}` || args["call_b"] != `{"city":"Rome"}` {
		t.Fatalf("arguments %v (events %s)", args, types(evs))
	}
	out := final(t, evs)["output"].([]any)
	if len(out) != 2 || out[0].(map[string]any)["call_id"] != "call_a" || out[1].(map[string]any)["arguments"] != `{"city":"Rome"}` {
		t.Fatalf("final output %v", out)
	}
	if final(t, evs)["usage"] != nil {
		t.Fatal("no usage chunk: usage must be null")
	}
}

// TestStreamUnicodeSplit: an emoji whose UTF-8 bytes are split across two
// chunks, and a surrogate pair escape split the same way, arrive whole.
func TestStreamUnicodeSplit(t *testing.T) {
	emoji := "😀"
	first, second := emoji[:2], emoji[2:]
	evs, err := translate(t, sse(
		`{"id":"c","choices":[{"delta":{"content":"a`+first+`"}}]}`,
		`{"id":"c","choices":[{"delta":{"content":"`+second+`b"}}]}`,
		`{"id":"c","choices":[{"delta":{"content":"c\ud83d"}}]}`,
		`{"id":"c","choices":[{"delta":{"content":"\ude00d"}}]}`,
		`{"id":"c","choices":[{"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`))
	if err != nil {
		t.Fatal(err)
	}
	if d := deltas(evs, "response.output_text.delta"); d != "a😀bc😀d" {
		t.Fatalf("text %q", d)
	}
	for _, e := range evs {
		if e.Type == "response.output_text.delta" && strings.ContainsRune(e.Raw["delta"].(string), '\uFFFD') {
			t.Fatalf("a broken character was relayed: %q", e.Raw["delta"])
		}
	}
}

// TestStreamEnds: [DONE] without finish_reason completes; a finish_reason
// and then EOF without [DONE] completes; EOF with neither is an error
// (the stream was cut) with no terminal event; length is incomplete.
func TestStreamEnds(t *testing.T) {
	text := `{"id":"c","choices":[{"delta":{"content":"hi"}}]}`
	evs, err := translate(t, sse(text, "[DONE]"))
	if err != nil || final(t, evs)["status"] != "completed" {
		t.Fatalf("[DONE] without finish_reason: %v %s", err, types(evs))
	}
	evs, err = translate(t, sse(text, `{"id":"c","choices":[{"delta":{},"finish_reason":"length"}]}`))
	if err != nil || final(t, evs)["status"] != "incomplete" || evs[len(evs)-1].Type != "response.incomplete" {
		t.Fatalf("length then EOF: %v %s", err, types(evs))
	}
	evs, err = translate(t, sse(text))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut stream: err %v", err)
	}
	for _, e := range evs {
		if strings.HasPrefix(e.Type, "response.complet") || e.Type == "response.incomplete" {
			t.Fatalf("a cut stream must not complete: %s", types(evs))
		}
	}
}

// TestStreamErrorChunk: an error object in the stream becomes an error
// event (OpenAI's shape), and nothing after it.
func TestStreamErrorChunk(t *testing.T) {
	evs, err := translate(t, sse(`{"id":"c","choices":[{"delta":{"content":"hi"}}]}`,
		`{"error":{"message":"Provider returned error","code":502}}`, `{"id":"c","choices":[{"delta":{"content":"late"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != "error" || last.Raw["message"] != "Provider returned error" || last.Raw["code"] != 502.0 {
		t.Fatalf("events %s, last %v", types(evs), last.Raw)
	}
	if strings.Contains(deltas(evs, "response.output_text.delta"), "late") {
		t.Fatal("text after the error was relayed")
	}
}

// TestStreamReasoning: reasoning_content deltas become a reasoning item
// before the message.
func TestStreamReasoning(t *testing.T) {
	evs, err := translate(t, sse(
		`{"id":"c","choices":[{"delta":{"reasoning_content":"Let me "}}]}`,
		`{"id":"c","choices":[{"delta":{"reasoning_content":"think."}}]}`,
		`{"id":"c","choices":[{"delta":{"content":"42"},"finish_reason":"stop"}]}`, "[DONE]"))
	if err != nil {
		t.Fatal(err)
	}
	out := final(t, evs)["output"].([]any)
	if len(out) != 2 || out[0].(map[string]any)["type"] != "reasoning" || out[1].(map[string]any)["type"] != "message" {
		t.Fatalf("output %v", out)
	}
	if d := deltas(evs, "response.reasoning_text.delta"); d != "Let me think." {
		t.Fatalf("reasoning %q", d)
	}
}
