package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// compaction: POST /responses/compact answers a schema-valid
// response.compaction with a compaction item; that output, plus a new user
// message, is accepted as the input of the next response.
func compaction(t *testing.T, s *suite) {
	status, _, b := s.post(t, "/responses/compact", map[string]any{"model": s.model,
		"prompt_cache_key": "aptix-conformance-compact", "input": []any{
			userMsg("We agreed to launch on Tuesday and notify support first."),
			map[string]any{"type": "message", "role": "assistant", "content": "Understood. The launch is Tuesday, with support notified beforehand."},
		}})
	if status != http.StatusOK {
		t.Fatalf("POST /responses/compact: HTTP %d: %s", status, b)
	}
	if err := s.v.Compaction(b); err != nil {
		t.Fatalf("compaction fails the Open Responses schema: %v\nbody: %s", err, b)
	}
	var c struct {
		Object string            `json:"object"`
		Output []json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(b, &c)
	found := false
	for _, raw := range c.Output {
		var it item
		_ = json.Unmarshal(raw, &it)
		found = found || (it.Type == "compaction" && it.EncryptedContent != "")
	}
	if c.Object != "response.compaction" || !found {
		t.Fatalf("object %q, compaction item found %v: %s", c.Object, found, b)
	}

	input := make([]any, 0, len(c.Output)+1)
	for _, raw := range c.Output {
		input = append(input, raw)
	}
	input = append(input, userMsg("When do we launch?"))
	r := s.create(t, map[string]any{"input": input})
	completedWithMessage(t, r)
	if s.opts.Deterministic && !s.opts.Stateless && !strings.Contains(r.text(), `Compacted history:`) {
		t.Errorf("sandbox reply does not show the compacted history: %q", r.text())
	}
}

// compactionWithoutModel: model is required by the compact endpoint.
func compactionWithoutModel(t *testing.T, s *suite) {
	status, _, b := s.post(t, "/responses/compact", map[string]any{"input": []any{userMsg("Compact this conversation.")}})
	if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		t.Fatalf("HTTP %d, want 400 or 422: %s", status, b)
	}
	if err := s.v.ErrorBody(b); err != nil {
		t.Errorf("error body: %v: %s", err, b)
	}
}
