package sandbox_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestStateFileKeepsResponsesAcrossRestarts: a sandbox restarted on the same
// StateFile still continues from a response of the previous run (as the
// real API would), where one without it answers 400 not found.
func TestStateFileKeepsResponsesAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox", "responses.jsonl")
	ts, first := start(t, sandbox.Options{StateFile: path})
	resp, b, err := post(t, ts.URL, `{"model":"m","input":"first turn"}`, "")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first turn: %v %s", err, b)
	}
	var r struct{ ID string }
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		t.Fatalf("no response id: %s", b)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	ts.Close()

	continued := `{"model":"m","previous_response_id":"` + r.ID + `","input":"second turn"}`
	memOnly, _ := start(t, sandbox.Options{})
	if resp, b, _ := post(t, memOnly.URL, continued, ""); resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a sandbox without the state knows %s: %s", r.ID, b)
	}
	restarted, second := start(t, sandbox.Options{StateFile: path})
	t.Cleanup(func() { second.Close() })
	resp, b, err = post(t, restarted.URL, continued, "")
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Continuing from "+r.ID) {
		t.Fatalf("after a restart, previous_response_id %s: %v status %v %s", r.ID, err, resp.StatusCode, b)
	}
	if g, err := http.Get(restarted.URL + "/v1/responses/" + r.ID); err != nil || g.StatusCode != http.StatusOK {
		t.Fatalf("GET restored response: %v %v", err, g.StatusCode)
	}

	// A line cut short by a crash loses that response only.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"resp_cut","respo`)
	f.Close()
	third, s3 := start(t, sandbox.Options{StateFile: path})
	t.Cleanup(func() { s3.Close() })
	if resp, b, _ := post(t, third.URL, continued, ""); resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after a torn line: %s", b)
	}
}
