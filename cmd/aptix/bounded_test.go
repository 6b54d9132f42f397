package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestExecHonoursTimeoutWhenServerStops: `aptix exec --timeout` returns at
// its timeout when the server goes away while it waits for the answer (it
// used to wait for ever inside the NATS client's consumer reset).
func TestExecHonoursTimeoutWhenServerStops(t *testing.T) {
	srv, url := natstest.Start(t)
	_, js := natstest.Connect(t, url)
	if _, err := layout.EnsureStream(context.Background(), js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	old := natsURL
	natsURL = url
	defer func() { natsURL = old }()
	stderr := &syncWriter{}
	go func() {
		// Once the turn is sent (after the 2 s stage check: no stages here).
		for !strings.Contains(stderr.String(), "sent") {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		srv.Shutdown()
	}()
	start := time.Now()
	err := runExec(context.Background(), execFlags{conversation: "c-stop", timeout: 4 * time.Second}, "hello", &bytes.Buffer{}, stderr)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("exec --timeout 4s returned after %s", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}

// TestBoundedReturnsAtTheDeadline: a body that ignores its context cannot
// hold a command past its deadline.
func TestBoundedReturnsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	block := make(chan struct{})
	defer close(block)
	start := time.Now()
	err := bounded(ctx, func(context.Context) error { <-block; return nil })
	if took := time.Since(start); took > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after %s: %v", took, err)
	}
	if err := bounded(context.Background(), func(context.Context) error { return errors.New("own") }); err == nil || err.Error() != "own" {
		t.Fatalf("f's error: %v", err)
	}
}

// syncWriter is a buffer one goroutine writes while another reads.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
