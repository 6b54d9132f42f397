package caller_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

const ctxBlock = "[CONTEXT]\n\n=== CHUNK 1 ===\nId: ctx_1\nPath: a.go\nLines: 1-2\nLanguage: go\n```go\nx\n```"

func TestStreamingTextDeltas(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	sink := &recorder{}
	body := requestBody(t, map[string]any{"input": []any{message("user", "[MODE: DDR_CREATION]\n\n[INSTRUCTION]\nStream please", ctxBlock)}})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: body, Stream: true, Deltas: sink})
	if res.Error != nil || res.Status != 200 || !res.Streamed {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(string(srv.LastRequest()), `"stream":true`) {
		t.Fatalf("stream flag not sent: %s", srv.LastRequest())
	}
	deltas := sink.all()
	var text strings.Builder
	for i, d := range deltas {
		if d.Seq != i {
			t.Fatalf("delta %d has seq %d", i, d.Seq)
		}
		if d.Type == caller.DeltaText {
			text.WriteString(d.Text)
		}
	}
	final := outputText(t, res.Body)
	if final != "Sandbox reply (mode DDR_CREATION) to: Stream please. Context chunks: ctx_1." || text.String() != final || len(deltas) < 4 {
		t.Fatalf("deltas %q final %q (%d deltas)", text.String(), final, len(deltas))
	}
	last := deltas[len(deltas)-1]
	if last.Type != caller.DeltaDone || last.Status != "completed" {
		t.Fatalf("last delta %+v", last)
	}
	// The body is the final response object, the same shape as non-streaming.
	var r map[string]json.RawMessage
	if err := json.Unmarshal([]byte(res.Body), &r); err != nil || string(r["object"]) != `"response"` || string(r["status"]) != `"completed"` || r["sequence_number"] != nil {
		t.Fatalf("body %s", res.Body)
	}
}

func TestStreamingFunctionCallDeltas(t *testing.T) {
	ts, _ := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	sink := &recorder{}
	body := requestBody(t, map[string]any{"input": "call it", "tool_choice": "required", "tools": []any{map[string]any{
		"type": "function", "name": "ddr_document", "strict": true, "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"title": map[string]any{"type": "string"}, "sections": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
			"required":   []any{"title", "sections"}, "additionalProperties": false}}}})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: body, Stream: true, Deltas: sink})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	var r struct {
		Output []struct {
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(res.Body), &r); err != nil {
		t.Fatal(err)
	}
	fc := r.Output[0]
	var args strings.Builder
	n := 0
	for _, d := range sink.all() {
		if d.Type != caller.DeltaArguments {
			continue
		}
		n++
		if d.ItemID != fc.ID || d.CallID != fc.CallID || !strings.HasPrefix(d.CallID, "call_") || d.Name != "ddr_document" {
			t.Fatalf("argument delta without its call: %+v (item %s)", d, fc.ID)
		}
		args.WriteString(d.Text)
	}
	if n < 2 || args.String() != fc.Arguments || !json.Valid([]byte(args.String())) {
		t.Fatalf("%d deltas %q final %q", n, args.String(), fc.Arguments)
	}
}

func TestStreamingFailures(t *testing.T) {
	t.Run("error event is data", func(t *testing.T) {
		ts, _ := startSandbox(t, sandbox.Options{Faults: "stream-error"})
		c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
		sink := &recorder{}
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Stream: true, Deltas: sink})
		if res.Error == nil || res.Error.Code != "server_error" || res.Error.Type != "stream_error" || !strings.Contains(res.Body, `"type":"error"`) || res.Attempts != 1 {
			t.Fatalf("result %+v error %+v", res, res.Error)
		}
		d := sink.all()
		if last := d[len(d)-1]; last.Type != caller.DeltaDone || last.Status != "error" || last.Error == "" {
			t.Fatalf("last delta %+v", last)
		}
	})
	t.Run("500 before the stream is retried", func(t *testing.T) {
		ts, srv := startSandbox(t, sandbox.Options{})
		c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, HTTPClient: faultSequence("500"), BaseBackoff: time.Millisecond})
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Stream: true, Deltas: &recorder{}})
		if res.Error != nil || res.Attempts != 2 || srv.Requests() != 2 {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("stream cut before the final event", func(t *testing.T) {
		sse := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"partial\"}\n\n"
		ts, count := fixedServer(t, 200, map[string]string{"Content-Type": "text/event-stream"}, sse)
		c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, BaseBackoff: time.Millisecond})
		sink := &recorder{}
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Stream: true, Deltas: sink})
		// Text already reached the sink: a retry would repeat it, so none.
		if res.Error == nil || res.Error.Type != "connection_error" || !strings.Contains(res.Error.Message, "without response.completed") || count.Load() != 1 {
			t.Fatalf("result %+v error %+v requests %d", res, res.Error, count.Load())
		}
		if d := sink.all(); d[0].Text != "partial" {
			t.Fatalf("deltas %+v", d)
		}
	})
}

func TestNATSDeltas(t *testing.T) {
	nc, _ := startJetStream(t)
	sub, err := nc.SubscribeSync(contracts.DeltaSubject("conv-1", "turn-1"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{ConversationID: "conv-1", TurnID: "turn-1", Body: simpleBody(t, "over nats"),
		Stream: true, Deltas: caller.NATSDeltas(nc, "conv-1", "turn-1")})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	var text strings.Builder
	for {
		msg, err := sub.NextMsg(2 * time.Second)
		if err != nil {
			t.Fatalf("waiting for deltas: %v", err)
		}
		var d caller.Delta
		if err := json.Unmarshal(msg.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Type == caller.DeltaDone {
			if d.Status != "completed" {
				t.Fatalf("done %+v", d)
			}
			break
		}
		text.WriteString(d.Text)
	}
	if text.String() != outputText(t, res.Body) {
		t.Fatalf("nats deltas %q final %q", text.String(), outputText(t, res.Body))
	}
}

func TestStreamingAgainstBackendThatIgnoresStream(t *testing.T) {
	const body = `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"whole answer"}]}]}`
	ts, _ := fixedServer(t, 200, map[string]string{"Content-Type": "application/json"}, body)
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	sink := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Stream: true, Deltas: sink})
	d := sink.all()
	if res.Error != nil || res.Body != body || len(d) != 2 || d[0].Text != "whole answer" || d[0].ItemID != "msg_1" || d[1].Type != caller.DeltaDone || d[1].Seq != 1 {
		t.Fatalf("result %+v deltas %+v", res, d)
	}
}

// The upstream's data: [DONE] ends a stream: after the terminal event it is
// read (the connection goes back to the pool: consecutive streamed calls
// share one), before it the stream was cut.
func TestStreamingDoneSentinel(t *testing.T) {
	srv := sandbox.New(sandbox.Options{Logger: quiet})
	ts := httptest.NewUnstartedServer(srv)
	var conns atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	for i := range 3 {
		res := c.Call(context.Background(), caller.Input{TurnID: "t" + strconv.Itoa(i), Body: simpleBody(t, "x"), Stream: true, Deltas: &recorder{}})
		if res.Error != nil || !res.Streamed {
			t.Fatalf("call %d: %+v", i, res.Error)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("3 streamed calls opened %d connections, want 1 (the stream read to its end)", n)
	}

	early := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"partial\"}\n\n" +
		"data: [DONE]\n\n"
	cut, _ := fixedServer(t, 200, map[string]string{"Content-Type": "text/event-stream"}, early)
	c = caller.New(profileSet(cut.URL, nil), caller.Options{Logger: quiet, BaseBackoff: time.Millisecond})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x"), Stream: true, Deltas: &recorder{}})
	if res.Error == nil || !strings.Contains(res.Error.Message, "without response.completed") {
		t.Fatalf("[DONE] before the terminal event: %+v", res.Error)
	}
}
