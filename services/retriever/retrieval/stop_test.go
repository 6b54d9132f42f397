package retrieval

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCleanStopLogsNoError: the process draining its NATS connection on a
// clean stop ends the index's bucket watch; that is no error (every clean
// stop of aptix up ended with "ERROR local index stopped following the
// chunk store").
func TestCleanStopLogsNoError(t *testing.T) {
	_, url := natstest.Start(t)
	nc, js := natstest.Connect(t, url)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ix, err := Open(context.Background(), js, Options{DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "caught up"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("index never caught up:\n%s", logs.String())
		}
	}
	if err := nc.Drain(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !nc.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("connection not closed")
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a clean stop logged an error:\n%s", logs.String())
	}
}
