package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// The request queue is a work queue: a request is removed when the
// retriever acknowledges it. When that empties the stream's newest storage
// block, nats-server deletes the block's file and creates a new one (with a
// tombstone) so it keeps its sequence; at one turn at a time that is every
// request, and it cost 0.25-0.45 ms of CPU per request, more than the rest of
// the queue's work (a publish, a delivery and an ack take ~0.15 ms).
//
// A keeper message, on a queue subject no consumer takes, keeps the newest
// block from emptying. Blocks roll over as they fill (4 MiB and more), so the
// retriever writes a fresh keeper into the newest block once a second while
// requests flow, and purges the older ones: two small writes a second
// instead of two file operations per request.

// keeperInterval is how often a busy queue gets a fresh keeper.
const keeperInterval = time.Second

// keepQueue keeps a keeper in the queue's newest block while the stage
// handles requests (busy changes as it does), until ctx ends. A deployment
// whose queue lacks the keeper subject, or whose retriever may not purge
// the queue, gets a debug line and the old cost, nothing worse.
func keepQueue(ctx context.Context, js jetstream.JetStream, busy *atomic.Int64, log *slog.Logger) {
	last := int64(-1)
	tick := time.NewTicker(keeperInterval)
	defer tick.Stop()
	for {
		if n := busy.Load(); n != last {
			if err := keepOnce(ctx, js); err != nil {
				if ctx.Err() == nil {
					log.Debug("queue keeper not written: an emptied queue block costs a file per request", "err", err)
				}
				if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
					return
				}
			} else {
				last = n
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keepOnce writes a keeper and removes every older one.
func keepOnce(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, contracts.QueueKeeperSubject, nil); err != nil {
		return err
	}
	s, err := js.Stream(ctx, contracts.QueueStreamName)
	if err != nil {
		return err
	}
	return s.Purge(ctx, jetstream.WithPurgeSubject(contracts.QueueKeeperSubject), jetstream.WithPurgeKeep(1))
}

// QueuedRequests is how many requests the queue holds: its messages
// without the keeper.
func QueuedRequests(ctx context.Context, q jetstream.Stream) (uint64, error) {
	info, err := q.Info(ctx, jetstream.WithSubjectFilter(contracts.QueueKeeperSubject))
	if err != nil {
		return 0, err
	}
	return info.State.Msgs - min(info.State.Msgs, info.State.Subjects[contracts.QueueKeeperSubject]), nil
}
