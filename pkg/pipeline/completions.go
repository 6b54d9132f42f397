package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Completions follows completed events with one ordered consumer and hands
// each to the caller waiting for its turn. A client with many turns in flight
// (a gateway, the benchmark) pays for one consumer, not one per turn as Await
// does. Completions that arrive before anyone waits are kept until claimed.
type Completions struct {
	js   jetstream.JetStream
	cc   jetstream.ConsumeContext
	mu   sync.Mutex
	got  map[string]contracts.Turn
	wait map[string]chan contracts.Turn
	seen map[string]int
	dups int
	errs int
}

// WatchCompletions starts following aptix.completed.<conversationFilter>.>
// (conversationFilter "*" for all) from now on: start it before submitting.
func WatchCompletions(ctx context.Context, js jetstream.JetStream, conversationFilter string) (*Completions, error) {
	c := &Completions{js: js, got: map[string]contracts.Turn{}, wait: map[string]chan contracts.Turn{}, seen: map[string]int{}}
	cons, err := js.OrderedConsumer(ctx, contracts.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.SubjectPrefix + "." + contracts.StageCompleted + "." + conversationFilter + ".>"},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("watch completions: %w", err)
	}
	c.cc, err = cons.Consume(c.deliver)
	if err != nil {
		return nil, fmt.Errorf("watch completions: %w", err)
	}
	return c, nil
}

func (c *Completions) deliver(m jetstream.Msg) {
	var t contracts.Turn
	data, err := EventData(context.Background(), c.js, m.Headers(), m.Data())
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || unmarshalTurn(data, &t) != nil || t.TurnId == "" {
		c.errs++
		return
	}
	c.seen[t.TurnId]++
	if c.seen[t.TurnId] > 1 {
		c.dups++
		return
	}
	if ch, ok := c.wait[t.TurnId]; ok {
		delete(c.wait, t.TurnId)
		ch <- t
		return
	}
	c.got[t.TurnId] = t
}

// Wait returns the completion of turnID, waiting until ctx ends.
func (c *Completions) Wait(ctx context.Context, turnID string) (contracts.Turn, error) {
	c.mu.Lock()
	if t, ok := c.got[turnID]; ok {
		delete(c.got, turnID)
		c.mu.Unlock()
		return t, nil
	}
	ch := make(chan contracts.Turn, 1)
	c.wait[turnID] = ch
	c.mu.Unlock()
	select {
	case t := <-ch:
		return t, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.wait, turnID)
		c.mu.Unlock()
		return contracts.Turn{}, fmt.Errorf("turn %s: %w", turnID, ctx.Err())
	}
}

// Counts reports how many distinct turns completed, how many completions
// were duplicates of a turn already seen, and how many could not be decoded.
func (c *Completions) Counts() (turns, duplicates, undecodable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen), c.dups, c.errs
}

// Stop ends the watch.
func (c *Completions) Stop() { c.cc.Stop() }
