package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFileIsCompacted: past twice the responses kept in memory, the
// state file is rewritten with the kept ones, and a restart still has the
// newest.
func TestStateFileIsCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "responses.jsonl")
	s := New(Options{StateFile: path, Logger: slog.New(slog.DiscardHandler)})
	n := 2*keepResponses + 5
	for i := range n {
		s.save(fmt.Sprintf("resp_%d", i), stored{response: []byte(`{}`)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines > keepResponses+10 {
		t.Errorf("state file has %d records after %d saves, want about %d", lines, n, keepResponses)
	}
	again := New(Options{StateFile: path, Logger: slog.New(slog.DiscardHandler)})
	defer again.Close()
	if _, ok := again.lookup(fmt.Sprintf("resp_%d", n-1)); !ok {
		t.Error("newest response lost across the restart")
	}
	if _, ok := again.lookup("resp_0"); ok {
		t.Error("oldest response kept beyond the bound")
	}
}
