package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

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
