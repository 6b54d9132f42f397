package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestAwaitHonoursDeadlineWhenServerStops: a client waiting for a turn
// returns at its deadline even when the server goes away mid-wait (the
// ordered consumer used to retry re-creating itself for ever inside Next).
func TestAwaitHonoursDeadlineWhenServerStops(t *testing.T) {
	srv, url := natstest.Start(t)
	_, js := natstest.Connect(t, url)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() {
		time.Sleep(300 * time.Millisecond)
		srv.Shutdown()
	}()
	start := time.Now()
	_, err := client.Await(ctx, js, "c1", "t1")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Await returned after %s with a 2s deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}
