package caller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// chatSet is a Chat Completions profile in front of the sandbox's chat endpoint.
func chatSet(url string) *profiles.Set {
	return profileSet(url, func(p *profiles.Profile) { p.API = profiles.APIChatCompletions })
}

// TestChatStreamDeltas: a streamed call to a Chat Completions backend
// relays text deltas as they come and ends with a Responses body (the
// translated reply) that the mapper can read; the request that went out
// was Chat Completions with stream_options.
func TestChatStreamDeltas(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 0)
	c := caller.New(chatSet(ts.URL), caller.Options{Logger: quiet})
	rec := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "chat-stream", Body: simpleBody(t, "stream over chat"), Stream: true, Deltas: rec})
	if res.Error != nil || res.Status != 200 {
		t.Fatalf("result %+v", res)
	}
	var text strings.Builder
	n := 0
	for _, d := range rec.all() {
		if d.Type == caller.DeltaText {
			text.WriteString(d.Text)
			n++
		}
	}
	if got := outputText(t, res.Body); got != text.String() || n < 3 || !strings.Contains(got, "stream over chat") {
		t.Fatalf("deltas %q (%d), body text %q", text.String(), n, got)
	}
	var sent map[string]any
	if err := json.Unmarshal(srv.LastRequest(), &sent); err != nil || sent["messages"] == nil || sent["stream_options"] == nil {
		t.Fatalf("sent %s", srv.LastRequest())
	}
	if last := rec.all()[len(rec.all())-1]; last.Type != caller.DeltaDone || last.Status != "completed" {
		t.Fatalf("last delta %+v", last)
	}
}

// TestChatPayOnceAndRepeatWarns: Chat Completions has no background mode,
// so a call cut off mid-flight is made again on redelivery, with a warning
// that names why; a call whose result was stored is never made again.
// Counts are read at the upstream.
func TestChatPayOnceAndRepeatWarns(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 400*time.Millisecond)
	c := caller.New(chatSet(ts.URL), caller.Options{Logger: quiet, Results: caller.NewMemResultStore()})
	in := caller.Input{TurnID: "chat-repeat", Body: simpleBody(t, reattachInstruction)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if r := c.Call(ctx, in); r.Error == nil {
		t.Fatalf("first call not cut off: %+v", r)
	}
	res := c.Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "may have been paid for twice") ||
		!strings.Contains(res.Warnings[0], "Chat Completions") {
		t.Fatalf("result %+v", res)
	}
	again := c.Call(context.Background(), in)
	if !again.Cached || again.Body != res.Body {
		t.Fatalf("a stored result must be returned, not paid again: %+v", again)
	}
	if st := srv.Snapshot(); st.Requests != 2 || st.Created != 2 {
		t.Fatalf("upstream requests %d created %d, want 2 and 2", st.Requests, st.Created)
	}
}

// TestChatEmulatedStream: tool-call emulation over a Chat Completions
// stream: the <tool_call> block never shows as text, and the result has
// the function call.
func TestChatEmulatedStream(t *testing.T) {
	script := `On it. <tool_call>{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}</tool_call>`
	ts, srv := startSandbox(t, sandbox.Options{Script: []string{script}})
	c := caller.New(chatSet(ts.URL), caller.Options{Logger: quiet})
	rec := &recorder{}
	emu := &contracts.ToolEmulation{Tools: json.RawMessage(`[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`)}
	res := c.Call(context.Background(), caller.Input{TurnID: "chat-emu", Body: simpleBody(t, "weather"), Stream: true, Deltas: rec, Emulation: emu})
	if res.Error != nil {
		t.Fatalf("result %+v", res)
	}
	var text strings.Builder
	for _, d := range rec.all() {
		if d.Type == caller.DeltaText {
			text.WriteString(d.Text)
		}
	}
	if strings.Contains(text.String(), "tool_call") || !strings.HasPrefix(text.String(), "On it.") {
		t.Fatalf("streamed text %q", text.String())
	}
	if !strings.Contains(res.Body, `"type":"function_call"`) || !strings.Contains(res.Body, `\"city\":\"Oslo\"`) {
		t.Fatalf("body %s", res.Body)
	}
	if srv.Requests() != 1 {
		t.Fatalf("requests %d", srv.Requests())
	}
}
