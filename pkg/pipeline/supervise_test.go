package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestSuperviseReconnectsAfterProtocolClose: a publish on a subject longer
// than the server's control line makes the server close the connection, and
// nats.go closes it for good (no reconnect). Supervise runs its function
// again on a new connection, which works; ctx ending then stops it cleanly.
func TestSuperviseReconnectsAfterProtocolClose(t *testing.T) {
	_, url := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs atomic.Int32
	healthy := make(chan *nats.Conn, 1)
	done := make(chan error, 1)
	go func() {
		done <- Supervise(ctx, quiet, func(context.Context) (*nats.Conn, error) {
			return nats.Connect(url, nats.MaxReconnects(-1))
		}, func(rctx context.Context, nc *nats.Conn) error {
			if runs.Add(1) == 1 {
				_ = nc.Publish(strings.Repeat("a", 5000), nil)
				_ = nc.Flush()
			} else {
				healthy <- nc
			}
			<-rctx.Done()
			if ctx.Err() != nil {
				return ctx.Err() // stopped: context.Canceled is no error
			}
			return errors.New("stage stopped: connection closed")
		})
	}()
	var nc *nats.Conn
	select {
	case nc = <-healthy:
	case err := <-done:
		t.Fatalf("Supervise returned %v after the connection was closed", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no second run within 10s")
	}
	if _, err := nc.Request("nobody.listens", nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("the new connection does not work: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Supervise after ctx ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Supervise did not return after ctx ended")
	}
	if !nc.IsClosed() || runs.Load() != 2 {
		t.Fatalf("runs %d, last connection closed %v", runs.Load(), nc.IsClosed())
	}
}

// TestSuperviseReturnsRunError: a run that fails with its connection up is
// a real error, returned at once (a new connection would not cure it).
func TestSuperviseReturnsRunError(t *testing.T) {
	_, url := natstest.Start(t)
	want := errors.New("bad config")
	var runs int
	err := Supervise(context.Background(), quiet, func(context.Context) (*nats.Conn, error) { return nats.Connect(url) },
		func(context.Context, *nats.Conn) error { runs++; return want })
	if !errors.Is(err, want) || runs != 1 {
		t.Fatalf("err %v after %d runs", err, runs)
	}
}
