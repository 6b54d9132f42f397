package conformance

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// streamingResponse: the raw stream passes the framing, schema and order
// checks (in s.stream) and ends completed with a message; then openai-go's
// own stream and ResponseAccumulator rebuild the same final response.
func streamingResponse(t *testing.T, s *suite) {
	st, final := s.stream(t, map[string]any{"input": []any{userMsg("Count from 1 to 5.")}})
	completedWithMessage(t, final)
	deltas := 0
	for _, ev := range st.Events {
		if ev.Type == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas == 0 {
		t.Errorf("no response.output_text.delta events: %v", types(st))
	}

	stream := s.sdk.Responses.NewStreaming(s.ctx(t), responses.ResponseNewParams{Model: s.model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Count from 1 to 5.")}})
	defer stream.Close()
	var acc responses.ResponseAccumulator
	var completed *responses.Response
	for stream.Next() {
		ev := stream.Current()
		var union responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &union); err != nil {
			t.Fatalf("event %s: %v", ev.Type, err)
		}
		if err := acc.AddEvent(union); err != nil {
			t.Fatalf("accumulator rejected %s: %v", ev.Type, err)
		}
		if c, ok := ev.AsAny().(responses.ResponseCompletedEvent); ok {
			completed = &c.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go stream: %v", err)
	}
	if completed == nil {
		t.Fatal("openai-go saw no response.completed")
	}
	rebuilt, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatalf("accumulator: %v", err)
	}
	snap := acc.Snapshot()
	if snap.TerminalEvent != "response.completed" || snap.OutputText() != completed.OutputText() ||
		rebuilt.OutputText() != completed.OutputText() || rebuilt.ID != completed.ID || completed.OutputText() == "" {
		t.Errorf("rebuilt from events: terminal %q text %q / %q; completed %q (id %s vs %s)",
			snap.TerminalEvent, snap.OutputText(), rebuilt.OutputText(), completed.OutputText(), rebuilt.ID, completed.ID)
	}
}
