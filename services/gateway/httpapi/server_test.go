package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestSubmitError: clients retry a 503 with Retry-After: a full
// admission queue (JetStream 10077, "maximum bytes exceeded") and a bus that
// does not answer are 503s; a turn over NATS' payload limit is a 413; any
// other publish failure a 500.
func TestSubmitError(t *testing.T) {
	nc, _ := natstest.JetStream(t)
	s := &Server{cfg: Config{NC: nc, MaxBodyBytes: 1024}}
	cases := []struct {
		err    error
		status int
	}{
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}), 503},
		{errors.New("nats: maximum messages exceeded"), 503},
		{fmt.Errorf("publish: %w", nats.ErrTimeout), 503},
		{fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), 503},
		{fmt.Errorf("publish: %w", nats.ErrMaxPayload), 413},
		{errors.New("something else"), 500},
	}
	for _, tc := range cases {
		if e := s.submitError(tc.err); e.Status != tc.status {
			t.Errorf("%v → %d, want %d", tc.err, e.Status, tc.status)
		}
	}
	nc.Close()
	if e := s.submitError(errors.New("connection closed")); e.Status != 503 {
		t.Errorf("closed connection → %d", e.Status)
	}
}

// TestWriteJSONMatchesEncodingJSON: the answers are the bytes encoding/json
// would write (map keys sorted, HTML characters escaped, raw JSON
// compacted); invalid UTF-8 is replaced as it does, the replacement
// character written as itself rather than escaped (the same JSON string).
func TestWriteJSONMatchesEncodingJSON(t *testing.T) {
	done := contracts.Turn{ConversationId: "c1", TurnId: "t1",
		LLM: &contracts.LLMResult{Backend: "sandbox", Model: "m", Status: 200,
			Body: `{"id":"u","status":"completed","output":[ {"type":"message", "content":[{"type":"output_text","text":"a <b> & c \u2028"}]}],"usage":{"input_tokens":3,"output_tokens":4}}`}}
	r, e := responses.Parse([]byte(`{"model":"m","input":"x","instructions":"be <brief>","metadata":{"z":"1","a":"2"},"temperature":0.5,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"}}`))
	if e != nil {
		t.Fatal(e)
	}
	m, e := responses.MetaFor(r)
	if e != nil {
		t.Fatal(e)
	}
	for _, v := range []any{responses.FromTurn(m, &done, 1), responses.Internal("x", "bad \xff <byte>").Body(),
		map[string]any{"b": 1, "a": []string{"<", "&"}}} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeJSON(rec, 200, v)
		got := strings.ReplaceAll(rec.Body.String(), "\uFFFD", `\ufffd`)
		if got != string(want) {
			t.Fatalf("writeJSON:\n got %s\nwant %s", got, want)
		}
	}
}
