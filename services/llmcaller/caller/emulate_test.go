package caller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// weatherEmulation is what the envelope hands over for a prompt-mode turn.
var weatherEmulation = &contracts.ToolEmulation{
	Tools: json.RawMessage(`[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}]`),
}

// weatherScript is a model answer in the seed's format, with text around
// the call and spaces inside the JSON, so the sandbox streams the block in
// several deltas.
const weatherScript = `Let me check the weather. <tool_call>{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}</tool_call> One moment.`

type fcOutput struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func functionCalls(t *testing.T, body string) []fcOutput {
	t.Helper()
	var r struct {
		Output []fcOutput `json:"output"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("body is not a response: %v", err)
	}
	var out []fcOutput
	for _, o := range r.Output {
		if o.Type == "function_call" {
			out = append(out, o)
		}
	}
	return out
}

func TestEmulatedCall(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{Script: []string{weatherScript}})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "Weather in Paris?"), Emulation: weatherEmulation})
	if res.Error != nil || len(res.Warnings) != 0 {
		t.Fatalf("%+v", res)
	}
	calls := functionCalls(t, res.Body)
	if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city": "Paris"}` ||
		!strings.HasPrefix(calls[0].CallID, "call_") || !strings.HasPrefix(calls[0].ID, "fc_") {
		t.Fatalf("calls %+v in %s", calls, res.Body)
	}
	if got := outputText(t, res.Body); got != "Let me check the weather.  One moment." {
		t.Fatalf("visible text %q", got)
	}
	if outputText(t, res.UpstreamBody) != weatherScript {
		t.Fatalf("the verbatim body must be kept: %s", res.UpstreamBody)
	}
	if strings.Contains(string(srv.LastRequest()), "tool_call") {
		t.Fatal("the caller must not change the request: the envelope already built it")
	}
}

// TestEmulatedStream: published text deltas never hold any part of a tag or
// of the call's JSON, together they are the visible text, and the call is
// published as an arguments delta with the call id of the final body.
func TestEmulatedStream(t *testing.T) {
	ts, _ := startSandbox(t, sandbox.Options{Script: []string{weatherScript}})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	sink := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "Weather?"), Stream: true, Deltas: sink, Emulation: weatherEmulation})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	calls := functionCalls(t, res.Body)
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	var text strings.Builder
	var args []caller.Delta
	deltas := sink.all()
	for i, d := range deltas {
		if d.Seq != i {
			t.Fatalf("delta %d has seq %d", i, d.Seq)
		}
		switch d.Type {
		case caller.DeltaText:
			for _, bad := range []string{"<", ">", "tool_call", "get_weather", "Paris"} {
				if strings.Contains(d.Text, bad) {
					t.Fatalf("text delta %q shows part of the tool call", d.Text)
				}
			}
			text.WriteString(d.Text)
		case caller.DeltaArguments:
			args = append(args, d)
		}
	}
	if text.String() != "Let me check the weather.  One moment." || text.String() != outputText(t, res.Body) {
		t.Fatalf("streamed text %q, final %q", text.String(), outputText(t, res.Body))
	}
	if len(args) != 1 || args[0].CallID != calls[0].CallID || args[0].ItemID != calls[0].ID || args[0].Name != "get_weather" || args[0].Text != `{"city": "Paris"}` {
		t.Fatalf("arguments deltas %+v, call %+v", args, calls[0])
	}
	if last := deltas[len(deltas)-1]; last.Type != caller.DeltaDone || last.Status != "completed" {
		t.Fatalf("last delta %+v", last)
	}
}

// TestEmulatedStreamIgnored: a backend that answers a streaming request
// with one JSON body still gets its answer published rewritten.
func TestEmulatedStreamIgnored(t *testing.T) {
	body := `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>"}]}]}`
	ts, _ := fixedServer(t, 200, map[string]string{"Content-Type": "application/json"}, body)
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	sink := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "Weather?"), Stream: true, Deltas: sink, Emulation: weatherEmulation})
	if res.Error != nil || res.UpstreamBody != body {
		t.Fatalf("%+v", res)
	}
	deltas := sink.all()
	if len(deltas) != 2 || deltas[0].Type != caller.DeltaArguments || deltas[0].Text != `{"city":"Oslo"}` || deltas[1].Type != caller.DeltaDone {
		t.Fatalf("deltas %+v", deltas)
	}
}

// TestEmulatedWarnings: a block the parser does not accept stays text, the
// body stays verbatim, and the result says why.
func TestEmulatedWarnings(t *testing.T) {
	script := `<tool_call>{"name":"get_weather","arguments":{"town":"Paris"}}</tool_call>`
	ts, _ := startSandbox(t, sandbox.Options{Script: []string{script}})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "Weather?"), Emulation: weatherEmulation})
	if res.Error != nil || res.UpstreamBody != "" || outputText(t, res.Body) != script || len(res.Warnings) != 1 ||
		!strings.Contains(res.Warnings[0], `strict tool "get_weather"`) {
		t.Fatalf("%+v", res)
	}
}

// TestEmulationRejectedBeforeTheCall: tools the parser cannot use fail the
// turn without paying for a call.
func TestEmulationRejectedBeforeTheCall(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	bad := &contracts.ToolEmulation{Tools: json.RawMessage(`[{"type":"function","name":"f","strict":true,"parameters":{"type":7}}]`)}
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Emulation: bad})
	if res.Error == nil || res.Error.Type != "aptix_invalid_request" || srv.Requests() != 0 {
		t.Fatalf("%+v after %d requests", res, srv.Requests())
	}
}

// TestEmulatedHistoryIsVerbatim: a backend without previous_response_id is
// replayed its own words (the <tool_call> text), not function_call items it
// cannot read.
func TestEmulatedHistoryIsVerbatim(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{Script: []string{weatherScript}})
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.SupportsPreviousResponseID = false })
	c := caller.New(set, caller.Options{Logger: quiet, History: caller.NewMemHistoryStore()})
	ctx := context.Background()
	turn1 := c.Call(ctx, caller.Input{TurnID: "t1", Body: simpleBody(t, "Weather?"), Emulation: weatherEmulation})
	if turn1.Error != nil || turn1.UpstreamBody == "" {
		t.Fatalf("%+v", turn1)
	}
	id1 := responseID(t, turn1.Body)
	turn2 := c.Call(ctx, caller.Input{TurnID: "t2", Emulation: weatherEmulation,
		Body: requestBody(t, map[string]any{"previous_response_id": id1, "input": []any{message("user", "And tomorrow?")}})})
	if turn2.Error != nil {
		t.Fatal(turn2.Error)
	}
	var sent struct {
		Input []struct {
			Type    string                  `json:"type"`
			Role    string                  `json:"role"`
			Content []struct{ Text string } `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(srv.LastRequest(), &sent); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range sent.Input {
		types = append(types, it.Type+":"+it.Role)
	}
	if len(sent.Input) != 3 || strings.Join(types, " ") != "message:user message:assistant message:user" || sent.Input[1].Content[0].Text != weatherScript {
		t.Fatalf("replayed input %v: %s", types, srv.LastRequest())
	}
}
