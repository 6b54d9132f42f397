package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Supervise runs run on a connection from connect, and when that connection
// is closed for good under it, runs it again on a new one: the process
// recovers instead of exiting (docs/reliability.md). nats.go reconnects by
// itself after a network error, but some failures close the connection with
// no reconnect at all: a protocol error such as a line over the server's
// max_control_line ("maximum control line exceeded"), or reconnect attempts
// that ran out. Everything built on the old connection (consumers, KV
// handles, watches) is rebuilt by run.
//
// run's context ends when ctx does or when its connection closes; run must
// then return. Supervise returns when ctx ends (run's error, context
// cancellation aside), or run's error when run ends with its connection
// still open (a failure a new connection would not cure). The connection
// is drained before Supervise returns.
func Supervise(ctx context.Context, log *slog.Logger, connect func(context.Context) (*nats.Conn, error), run func(ctx context.Context, nc *nats.Conn) error) error {
	if log == nil {
		log = slog.Default()
	}
	wait := minRestartWait
	for {
		nc, err := connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("NATS connect failed, retrying", "err", err, "retry_in", wait)
			if !sleepCtx(ctx, wait) {
				return nil
			}
			wait = min(2*wait, maxRestartWait)
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		nc.SetClosedHandler(func(*nats.Conn) { cancel() })
		if nc.IsClosed() {
			cancel()
		}
		started := time.Now()
		err = run(rctx, nc)
		lost := nc.IsClosed() && ctx.Err() == nil
		cancel()
		if !lost {
			nc.SetClosedHandler(nil)
			DrainAndWait(nc, 10*time.Second)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				err = nil
			}
			return err
		}
		if time.Since(started) > time.Minute {
			wait = minRestartWait // a long healthy run: not a crash loop
		}
		log.Error("NATS connection closed and not reopened by the client; connecting again and restarting on a new one",
			"cause", nc.LastError(), "run_err", err, "retry_in", wait)
		if !sleepCtx(ctx, wait) {
			return nil
		}
		wait = min(2*wait, maxRestartWait)
	}
}

// The wait before a new connection after a lost one doubles from
// minRestartWait up to maxRestartWait, so a cause that persists does not
// spin.
const (
	minRestartWait = 100 * time.Millisecond
	maxRestartWait = 5 * time.Second
)

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// DrainAndWait drains nc and waits up to timeout until it is closed: Drain
// returns at once, and a process that exits (or an embedded server that
// shuts down) right after it would cut off what was still being flushed.
func DrainAndWait(nc *nats.Conn, timeout time.Duration) {
	if nc.IsClosed() {
		return
	}
	var once sync.Once
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { once.Do(func() { close(closed) }) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(timeout):
		nc.Close()
	}
}
