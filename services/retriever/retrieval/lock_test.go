package retrieval

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestDataDirInUseFailsInsteadOfHanging: a second Open on a data dir whose
// local index is open elsewhere fails after openTimeout, naming the cause,
// where it used to block for ever on the index's file lock.
func TestDataDirInUseFailsInsteadOfHanging(t *testing.T) {
	_, js := natstest.JetStream(t)
	dir := t.TempDir()
	first, err := Open(context.Background(), js, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ix, err := Open(context.Background(), js, Options{DataDir: dir})
		if err == nil {
			ix.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "another retriever") {
			t.Fatalf("second Open: %v", err)
		}
	case <-time.After(openTimeout + 10*time.Second):
		t.Fatalf("second Open still blocked after %v", time.Since(start))
	}
}
