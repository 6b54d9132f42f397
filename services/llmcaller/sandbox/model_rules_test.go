package sandbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// tripSchema is a strict structured-output schema with nested objects,
// arrays, enums and $defs.
const tripSchema = `{"type":"object","additionalProperties":false,
	"properties":{"city":{"type":"string","description":"Destination city"},"nights":{"type":"integer","minimum":1,"maximum":30},
	"budget":{"type":"string","enum":["low","mid","high"]},
	"days":{"type":"array","minItems":2,"items":{"$ref":"#/$defs/day"}},
	"travellers":{"type":"object","additionalProperties":false,"properties":{"adults":{"type":"integer"},"children":{"type":["integer","null"]}},"required":["adults","children"]}},
	"required":["city","nights","budget","days","travellers"],
	"$defs":{"day":{"type":"object","additionalProperties":false,"properties":{"title":{"type":"string"},"stops":{"type":"array","items":{"type":"string"}}},"required":["title","stops"]}}}`

// A json_schema text.format gets a reply that validates against the
// schema, with the values the request names, through openai-go (plain
// and streamed); json_object gets a JSON object.
func TestStructuredOutputs(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{})
	var schema map[string]any
	if err := json.Unmarshal([]byte(tripSchema), &schema); err != nil {
		t.Fatal(err)
	}
	p := params(userMessage("Plan 4 nights in Lisbon on a high budget."))
	p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "trip", Schema: schema, Strict: openai.Bool(true)}}}
	r, err := client.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	got := r.OutputText()
	validate(t, schema, got)
	var trip struct {
		City   string `json:"city"`
		Nights int    `json:"nights"`
		Budget string `json:"budget"`
		Days   []any  `json:"days"`
	}
	if err := json.Unmarshal([]byte(got), &trip); err != nil || trip.City != "Lisbon" || trip.Nights != 4 || trip.Budget != "high" || len(trip.Days) != 2 {
		t.Fatalf("structured output %s (%v)", got, err)
	}

	stream := client.Responses.NewStreaming(context.Background(), p)
	var acc responses.ResponseAccumulator
	for stream.Next() {
		ev := stream.Current()
		var u responses.ResponsesServerEventUnion
		_ = json.Unmarshal([]byte(ev.RawJSON()), &u)
		if err := acc.AddEvent(u); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if snap := acc.Snapshot(); snap.OutputText() != got {
		t.Fatalf("streamed %q, want %q", snap.OutputText(), got)
	}

	p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &responses.ResponseFormatJSONObjectParam{}}}
	r, err = client.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Sandbox bool   `json:"sandbox"`
		Reply   string `json:"reply"`
	}
	if err := json.Unmarshal([]byte(r.OutputText()), &obj); err != nil || !obj.Sandbox || !strings.HasPrefix(obj.Reply, "Sandbox reply (mode unspecified) to: Plan 4 nights") {
		t.Fatalf("json_object reply %q (%v)", r.OutputText(), err)
	}
}

// A json_schema format without a schema, or with one that is not JSON, is
// a 400 naming text.format.schema.
func TestStructuredOutputsBadFormat(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	for body, param := range map[string]string{
		`{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`:                 "text.format.schema",
		`{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":"nope"}}}`: "text.format",
		`{"model":"m","input":"hi","text":{"format":{"type":"xml"}}}`:                                    "text.format",
	} {
		resp, b, err := post(t, ts.URL, body, "")
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %v %s", body, err, b)
		}
		var e errBody
		_ = json.Unmarshal(b, &e)
		if e.Error.Param == nil || *e.Error.Param != param {
			t.Errorf("%s: param %v, want %s: %s", body, e.Error.Param, param, b)
		}
	}
}

// The tool rule without markers: a request that names what a tool does
// gets a call with the values it names, streamed too; the tool's output
// sent back gets a text answer quoting it; a request that names no tool
// gets the sentence.
func TestAutoToolCall(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	tools := `"tools":[{"type":"function","name":"get_time","description":"Current time in a timezone","parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}},` +
		`{"type":"function","name":"get_weather","description":"Get the current weather for a location","parameters":{"type":"object","properties":{"location":{"type":"string","description":"City name"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["location","days"]}}]`
	first := postOK(t, ts.URL, `{"model":"m",`+tools+`,"input":"What's the weather in Buenos Aires over the next 3 days?"}`)
	calls := first.calls(t)
	if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"location":"Buenos Aires","days":3}` {
		t.Fatalf("calls %+v in %v", calls, first.Output)
	}
	again := postOK(t, ts.URL, `{"model":"m",`+tools+`,"input":"What's the weather in Buenos Aires over the next 3 days?"}`)
	if c := again.calls(t); len(c) != 1 || c[0].CallID != calls[0].CallID {
		t.Fatalf("the same request must get the same call_id: %+v vs %+v", c, calls)
	}
	answer := postOK(t, ts.URL, `{"model":"m",`+tools+`,"previous_response_id":"`+first.ID+`","input":[`+
		`{"type":"function_call_output","call_id":"`+calls[0].CallID+`","output":"sunny"}]}`)
	if len(answer.calls(t)) != 0 || !strings.HasSuffix(answer.text(t), ` Tool get_weather (`+calls[0].CallID+`) returned "sunny".`) {
		t.Fatalf("after the output: calls %+v text %q", answer.calls(t), answer.text(t))
	}
	plain := postOK(t, ts.URL, `{"model":"m",`+tools+`,"input":"Say hello in exactly 3 words."}`)
	if len(plain.calls(t)) != 0 || plain.text(t) != "Sandbox reply (mode unspecified) to: Say hello in exactly 3 words.. Context chunks: none." {
		t.Fatalf("no tool named: calls %+v text %q", plain.calls(t), plain.text(t))
	}
	none := postOK(t, ts.URL, `{"model":"m",`+tools+`,"tool_choice":"none","input":"What's the weather in Oslo?"}`)
	if len(none.calls(t)) != 0 {
		t.Fatalf("tool_choice none called %+v", none.calls(t))
	}
	required := postOK(t, ts.URL, `{"model":"m",`+tools+`,"tool_choice":"required","input":"What time is it in Tokyo?"}`)
	if c := required.calls(t); len(c) != 1 || c[0].Name != "get_time" {
		t.Fatalf("required: %+v", c)
	}
	named := postOK(t, ts.URL, `{"model":"m",`+tools+`,"tool_choice":{"type":"function","name":"get_weather"},"input":"Anything for Paris?"}`)
	if c := named.calls(t); len(c) != 1 || c[0].Name != "get_weather" || c[0].Arguments != `{"location":"Paris","days":1}` {
		t.Fatalf("named: %+v", c)
	}

	// The same call, streamed: the call's events, then [DONE].
	res, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","stream":true,`+tools+`,"input":"What's the weather in Buenos Aires over the next 3 days?"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	st, err := conformance.ReadSSE(res.Body)
	if err != nil || !st.Done {
		t.Fatalf("stream: done %v %v", st.Done, err)
	}
	if err := conformance.CheckLifecycle(st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(st.Final), `"arguments":"{\"location\":\"Buenos Aires\",\"days\":3}"`) {
		t.Fatalf("streamed final %s", st.Final)
	}
}

// A marker wins over the auto rule, and a marker-less request in the
// pipeline's AGN-002 shape is matched on its instruction, not its context.
func TestAutoToolCallReadsTheInstruction(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},` +
		`{"type":"function","name":"read_file","description":"Read a file of the repository","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`
	marker := postOK(t, ts.URL, `{"model":"m",`+tools+`,"input":"What's the weather? [call:read_file {\"path\":\"a.go\"}]"}`)
	if c := marker.calls(t); len(c) != 1 || c[0].Name != "read_file" || c[0].Arguments != `{"path":"a.go"}` {
		t.Fatalf("marker: %+v", c)
	}
	ctx := "[CONTEXT]\n\n=== CHUNK 1 ===\nId: c1\nPath: weather.go\nLines: 1-1\nLanguage: go\n```go\n// get the weather forecast\n```"
	body, _ := json.Marshal(map[string]any{"model": "m", "tools": json.RawMessage(strings.TrimPrefix(tools, `"tools":`)), "input": []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "[MODE: ASK]\n\n[INSTRUCTION]\nExplain the retry loop"},
		map[string]any{"type": "input_text", "text": ctx}}}}})
	r := postOK(t, ts.URL, string(body))
	if len(r.calls(t)) != 0 || r.text(t) != "Sandbox reply (mode ASK) to: Explain the retry loop. Context chunks: c1." {
		t.Fatalf("context named a tool: calls %+v text %q", r.calls(t), r.text(t))
	}
}

// Every sandbox stream ends with data: [DONE], the stream-error fault's
// too (after its error event).
func TestStreamEndsWithDone(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	for _, fault := range []string{"", "stream-error"} {
		resp, b, err := post(t, ts.URL, `{"model":"m","stream":true,"input":"hi"}`, fault)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), "\n\ndata: [DONE]\n\n") || strings.Count(string(b), "[DONE]") != 1 {
			t.Fatalf("fault %q: stream ends %q", fault, b[max(0, len(b)-80):])
		}
	}
}
