package console

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// fetchBatch is how many messages one pull asks for.
const fetchBatch = 500

// readOrdered reads a stream through an ordered consumer in batches (one
// pull per batch, not one per message) until the consumer has nothing
// pending, limit messages were read (0: no limit) or fn returns false.
func readOrdered(ctx context.Context, s jetstream.Stream, cfg jetstream.OrderedConsumerConfig, limit int, fn func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read %v: %w", cfg.FilterSubjects, err)
	}
	read := 0
	for {
		n := fetchBatch
		if limit > 0 {
			n = min(n, limit-read)
		}
		if n <= 0 {
			return nil
		}
		batch, err := cons.FetchNoWait(n)
		if err != nil {
			return fmt.Errorf("read %v: %w", cfg.FilterSubjects, err)
		}
		got, done := 0, false
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if !done && (!fn(m, md) || md.NumPending == 0) {
				done = true
			}
		}
		read += got
		if err := batch.Error(); err != nil && got == 0 {
			return nil // nothing more (no messages is not an error here)
		}
		if done || got == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
