package stack

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// promptMode turns the test's sandbox profile into a backend without native
// function calling (docs/tool-emulation.md).
func promptMode(c *Config) {
	p, err := c.Profiles.Get("sandbox")
	if err != nil {
		panic(err)
	}
	p.Capabilities.ToolMode = profiles.ToolModePrompt
	c.Profiles.Put(p)
}

const weatherTools = `[{"type":"function","name":"get_weather","description":"Current weather of a city","strict":true,` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}]`

func weatherTurn(turnID string) contracts.AgentExecuteRequest {
	return contracts.AgentExecuteRequest{
		ConversationContext: &contracts.ConversationContext{Id: "weather", SystemPrompt: "You are a weather assistant."},
		ConversationId:      "conv-emu", TurnId: turnID, Instruction: "What is the weather in Paris and Oslo?",
		ToolsJson: weatherTools, ToolChoiceName: "required", RagScope: contracts.RagScopeNone,
	}
}

// TestToolEmulation drives prompt-mode turns through the whole pipeline: the
// backend is sent the seed's instructions instead of tools, answers with
// <tool_call> text, and the client receives tool calls as from a native
// backend, with the text outside the blocks and the verbatim answer as
// rawResponseJson.
func TestToolEmulation(t *testing.T) {
	script := `Checking both cities. <tool_call>{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}</tool_call>` +
		`<tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>`
	unknown := `<tool_call>{"name":"get_forecast","arguments":{"city":"Oslo"}}</tool_call>`
	e := newEnv(t, sandbox.Options{Script: []string{script, unknown}}, promptMode)

	turn := e.turn(weatherTurn("t1"))
	r := turn.Response
	if r.Kind != contracts.KindOK || r.FinishReason != contracts.FinishToolUse || r.Text != "Checking both cities. " || len(r.Warnings) != 0 {
		t.Fatalf("response %+v", r)
	}
	if len(r.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", r.ToolCalls)
	}
	for i, city := range []string{"Paris", "Oslo"} {
		c := r.ToolCalls[i]
		if c.Name != "get_weather" || c.ArgumentsJson != `{"city":"`+city+`"}` || !strings.HasPrefix(c.CallId, "call_") {
			t.Errorf("tool call %d: %+v", i, c)
		}
	}
	if r.ToolCalls[0].CallId == r.ToolCalls[1].CallId {
		t.Fatal("call ids must differ")
	}
	if got := rawOutputText(t, r.RawResponseJson); got != script {
		t.Fatalf("rawResponseJson must be the backend's answer verbatim, its text is %q", got)
	}

	// What the backend was sent: the injection as instructions, no tools,
	// no tool_choice, the boot prompt still the first input item.
	sent := sentBody(t, e.sb.LastRequest())
	instructions, _ := sent["instructions"].(string)
	if !strings.HasPrefix(instructions, "Tool calling instructions:\nOnly emit tool calls using <tool_call>...</tool_call>.\n") ||
		!strings.Contains(instructions, "\nTool choice is required: you MUST emit at least one <tool_call>.\nStrict tools: get_weather. Arguments MUST conform exactly to schema.\nAvailable tools (schema):\n") ||
		!strings.HasSuffix(instructions, "\n"+`<tool_call>{"name":"get_weather","arguments":"{\"city\":\"example\"}"}</tool_call>`) {
		t.Fatalf("instructions sent:\n%s", instructions)
	}
	if sent["tools"] != nil || sent["tool_choice"] != nil {
		t.Fatalf("function tools must not reach a prompt-mode backend: %v %v", sent["tools"], sent["tool_choice"])
	}
	if first := sent["input"].([]any)[0].(map[string]any); first["role"] != "system" {
		t.Fatalf("first input item %v", first)
	}

	// A call to a tool the request does not offer stays text, with a warning.
	turn2 := e.turn(weatherTurn("t2"))
	r2 := turn2.Response
	if r2.Kind != contracts.KindOK || r2.Text != unknown || len(r2.ToolCalls) != 0 || len(r2.Warnings) != 2 ||
		!strings.Contains(r2.Warnings[0], `unknown tool "get_forecast"`) || !strings.Contains(r2.Warnings[1], "tool_choice is required") {
		t.Fatalf("response %+v", r2)
	}
	if sent2 := sentBody(t, e.sb.LastRequest()); sent2["previous_response_id"] != r.ResponseContinuationId || sent2["instructions"] != instructions {
		t.Fatal("a continuation must thread by id and re-send the injection")
	}
	e.settled()
}

// TestToolEmulationStreaming: the live deltas of a prompt-mode turn never
// carry any part of a <tool_call> block; the call arrives as an arguments
// delta with the call id the client's completion holds.
func TestToolEmulationStreaming(t *testing.T) {
	// Spaces inside the block make the sandbox stream it in several deltas.
	script := `Sure, one moment while I look that up. <tool_call> {"name": "get_weather", "arguments": {"city": "Paris"}} </tool_call> Back soon.`
	e := newEnv(t, sandbox.Options{Script: []string{script}}, promptMode)
	req := weatherTurn("t1")
	req.ConversationId, req.Stream = "conv-emu-stream", true

	var mu sync.Mutex
	var deltas []caller.Delta
	done := make(chan struct{})
	sub, err := e.nc.Subscribe(contracts.DeltaSubject(req.ConversationId, req.TurnId), func(m *nats.Msg) {
		var d caller.Delta
		if err := json.Unmarshal(m.Data, &d); err != nil {
			t.Errorf("delta is not JSON: %s", m.Data)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		deltas = append(deltas, d)
		if d.Type == caller.DeltaDone {
			close(done)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	r := e.turn(req).Response
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no done delta")
	}
	mu.Lock()
	defer mu.Unlock()

	if r.Kind != contracts.KindOK || r.Text != "Sure, one moment while I look that up.  Back soon." || len(r.ToolCalls) != 1 ||
		r.ToolCalls[0].Name != "get_weather" || r.ToolCalls[0].ArgumentsJson != `{"city":"Paris"}` {
		t.Fatalf("response %+v", r)
	}
	var text strings.Builder
	var texts, calls int
	for _, d := range deltas {
		switch d.Type {
		case caller.DeltaText:
			texts++
			for _, bad := range []string{"<", ">", "tool_call", `"name"`, "get_weather", "Paris"} {
				if strings.Contains(d.Text, bad) {
					t.Fatalf("published text delta %q carries part of the tool call", d.Text)
				}
			}
			text.WriteString(d.Text)
		case caller.DeltaArguments:
			calls++
			if d.Name != "get_weather" || d.Text != `{"city":"Paris"}` || d.CallID != r.ToolCalls[0].CallId {
				t.Fatalf("arguments delta %+v, completion call %+v", d, r.ToolCalls[0])
			}
		}
	}
	if text.String() != r.Text || texts < 3 || calls != 1 {
		t.Fatalf("streamed text %q in %d deltas (%d calls), completion text %q", text.String(), texts, calls, r.Text)
	}
	e.settled()
}

// rawOutputText reads the output text of a raw /responses body.
func rawOutputText(t *testing.T, raw string) string {
	t.Helper()
	var r struct {
		Output []struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("rawResponseJson is not JSON: %v", err)
	}
	var sb strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			sb.WriteString(c.Text)
		}
	}
	return sb.String()
}
