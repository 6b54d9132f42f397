package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
)

// migrateSingleStream upgrades a deployment from the single-stream layout
// (APTIX holding aptix.requested.> too, discard "old") without losing a turn:
//
//  1. APTIX stops capturing aptix.requested.> (so APTIX_QUEUE can) and takes
//     its new limits; its events, in-flight turns included, stay where they are
//     and the envelope, llmcaller and mapper consumers go on unchanged.
//  2. APTIX_QUEUE is created (by the caller, EnsureStream).
//  3. Requests the old retriever consumer on APTIX had not acknowledged are
//     re-published into the queue with their own Nats-Msg-Id (a retriever of
//     the old version still running may also finish one: the retrieved event's
//     Nats-Msg-Id makes that harmless), then the old consumer is deleted.
//
// Step 3 waits for requests another process holds (up to their AckWait), so
// it runs in the background, in the retriever only; every retriever start
// retries what is left.
func migrateSingleStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) error {
	s, err := js.Stream(ctx, contracts.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	old := s.CachedInfo().Config
	if slices.Contains(old.Subjects, contracts.StageFilter(contracts.StageRequested)) {
		if _, err := js.UpdateStream(ctx, c.JetStreamConfig()); err != nil {
			return fmt.Errorf("migrate %s to the queue layout: %w", contracts.StreamName, err)
		}
	}
	if _, err := s.Consumer(ctx, Durable("retriever")); err != nil {
		return nil // nothing left to move (or already moved)
	}
	if _, err := js.CreateOrUpdateStream(ctx, c.QueueJetStreamConfig()); err != nil {
		return fmt.Errorf("create stream %s: %w", contracts.QueueStreamName, err)
	}
	return nil
}

// DrainOldQueue moves the requests still pending on the single-stream
// layout's retriever consumer into APTIX_QUEUE and deletes that consumer once
// it has nothing left. It returns how many requests it moved.
func DrainOldQueue(ctx context.Context, js jetstream.JetStream, within time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	moved := 0
	for {
		cons, err := js.Consumer(ctx, contracts.StreamName, Durable("retriever"))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return moved, nil
		}
		if err != nil {
			return moved, fmt.Errorf("old retriever consumer: %w", err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return moved, err
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			err := js.DeleteConsumer(ctx, contracts.StreamName, Durable("retriever"))
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return moved, fmt.Errorf("delete old retriever consumer: %w", err)
			}
			return moved, nil
		}
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return moved, err
		}
		var failed error
		for m := range batch.Messages() {
			if failed != nil {
				_ = m.Nak() // hand back the rest of the batch at once
				continue
			}
			h := nats.Header{}
			for k, v := range m.Headers() {
				h[k] = v
			}
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject(), Data: m.Data(), Header: h}); err != nil {
				_ = m.Nak()
				failed = fmt.Errorf("move %s to %s: %w", m.Subject(), contracts.QueueStreamName, backpressure.Wrap(err))
				continue
			}
			if err := m.DoubleAck(ctx); err != nil {
				failed = err
				continue
			}
			moved++
		}
		if failed != nil {
			return moved, failed
		}
		if ctx.Err() != nil {
			return moved, ctx.Err()
		}
	}
}
