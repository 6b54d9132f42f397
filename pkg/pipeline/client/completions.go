package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
)

// Completions follows completed events with one ordered consumer and hands
// each to the caller waiting for its turn. A client with many turns in flight
// (a gateway, the benchmark) pays for one consumer, not one per turn as Await
// does. Completions that arrive before anyone waits are kept until claimed.
//
// Completions are matched to waiters by the turn's key (contracts.TurnKey),
// never the turn id alone: two conversations may use the same turn id.
// The key comes from the subject and a completion is decoded by the
// caller that waits for it, on its own goroutine: every gateway replica
// sees every completion, and decoding them all on the consumer's one
// goroutine, under the lock, cost each replica a decode per turn of every
// other replica.
type Completions struct {
	js  jetstream.JetStream
	cc  jetstream.ConsumeContext
	mu  sync.Mutex
	got map[string]completion
	// wait holds every caller waiting for a turn: a client's retry of a
	// turn still running waits beside the request that sent it first, and
	// both get its answer.
	wait map[string][]chan completion
	seen map[string]int
	dups int
	errs int
	// arrived orders unclaimed completions and seen turns by arrival, so
	// both maps forget them after keep: a watcher of every conversation (a
	// gateway replica) sees completions of turns it never waits for.
	arrived []arrival
	keep    time.Duration
	turns   int
}

// completion is a completed event as stored (a claim-check stub is resolved
// when it is decoded).
type completion struct {
	header nats.Header
	data   []byte
}

// ErrUnreadableCompletion is Wait's error for a completion that arrived
// but could not be read (its claim-checked body unavailable, or not a turn).
var ErrUnreadableCompletion = errors.New("completion unreadable")

// decode reads the completion's turn. A claim-checked body is fetched
// within ctx, retried briefly: the object store may be failing over.
func (c *Completions) decode(ctx context.Context, m completion, conv, turnID string) (contracts.Turn, error) {
	var t contracts.Turn
	data, err := claim.EventData(ctx, c.js, m.header, m.data)
	for wait := 100 * time.Millisecond; err != nil && wait <= 400*time.Millisecond && ctx.Err() == nil; wait *= 2 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			data, err = claim.EventData(ctx, c.js, m.header, m.data)
		}
	}
	if err == nil {
		err = turncodec.Unmarshal(data, &t)
	}
	if err == nil && (t.TurnId != turnID || t.ConversationId != conv) {
		err = fmt.Errorf("its event names turn %q of conversation %q", t.TurnId, t.ConversationId)
	}
	if err != nil {
		c.mu.Lock()
		c.errs++
		c.mu.Unlock()
		return t, fmt.Errorf("%w: turn %s: %w", ErrUnreadableCompletion, contracts.TurnKey(conv, turnID), err)
	}
	return t, nil
}

type arrival struct {
	key string // contracts.TurnKey
	at  time.Time
}

// DefaultKeepUnclaimed is how long Completions keeps a completion nobody
// waits for yet (and remembers a turn for duplicate counting).
const DefaultKeepUnclaimed = 10 * time.Minute

// WatchCompletions starts following aptix.completed.<conversationFilter>.>
// (conversationFilter "*" for all) from now on: start it before submitting.
func WatchCompletions(ctx context.Context, js jetstream.JetStream, conversationFilter string) (*Completions, error) {
	c := &Completions{js: js, got: map[string]completion{}, wait: map[string][]chan completion{}, seen: map[string]int{}, keep: DefaultKeepUnclaimed}
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
	_, conv, turnID, ok := contracts.ParseSubject(m.Subject())
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok || conv == "" || turnID == "" {
		c.errs++
		return
	}
	key := contracts.TurnKey(conv, turnID)
	now := time.Now()
	c.forget(now)
	c.seen[key]++
	if c.seen[key] == 1 {
		c.turns++
		c.arrived = append(c.arrived, arrival{key, now})
	}
	if c.seen[key] > 1 {
		c.dups++
		return
	}
	got := completion{header: m.Headers(), data: m.Data()}
	if chs, ok := c.wait[key]; ok {
		delete(c.wait, key)
		for _, ch := range chs {
			ch <- got
		}
		return
	}
	c.got[key] = got
}

// forget drops what arrived more than keep ago (c.mu held).
func (c *Completions) forget(now time.Time) {
	n := 0
	for n < len(c.arrived) && now.Sub(c.arrived[n].at) > c.keep {
		delete(c.got, c.arrived[n].key)
		delete(c.seen, c.arrived[n].key)
		n++
	}
	if n > 0 {
		c.arrived = append(c.arrived[:0], c.arrived[n:]...)
	}
}

// SetKeep changes how long unclaimed completions are kept (tests).
func (c *Completions) SetKeep(d time.Duration) {
	c.mu.Lock()
	c.keep = d
	c.mu.Unlock()
}

// Pending is how many completions arrived that nobody has claimed yet.
func (c *Completions) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// Wait returns the completion of the conversation's turn, waiting until
// ctx ends.
func (c *Completions) Wait(ctx context.Context, conv, turnID string) (contracts.Turn, error) {
	key := contracts.TurnKey(conv, turnID)
	c.mu.Lock()
	if m, ok := c.got[key]; ok {
		delete(c.got, key)
		c.mu.Unlock()
		return c.decode(ctx, m, conv, turnID)
	}
	ch := make(chan completion, 1)
	c.wait[key] = append(c.wait[key], ch)
	c.mu.Unlock()
	select {
	case m := <-ch:
		return c.decode(ctx, m, conv, turnID)
	case <-ctx.Done():
		c.mu.Lock()
		c.unwait(key, ch)
		c.mu.Unlock()
		return contracts.Turn{}, fmt.Errorf("turn %s: %w", key, ctx.Err())
	}
}

// unwait removes one waiter of key (c.mu held).
func (c *Completions) unwait(key string, ch chan completion) {
	chs := c.wait[key]
	for i, w := range chs {
		if w == ch {
			chs = append(chs[:i], chs[i+1:]...)
			break
		}
	}
	if len(chs) == 0 {
		delete(c.wait, key)
	} else {
		c.wait[key] = chs
	}
}

// Counts reports how many distinct turns completed, how many completions
// were duplicates of a turn already seen, and how many could not be decoded
// (on a subject that names no turn, or when claimed).
func (c *Completions) Counts() (turns, duplicates, undecodable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turns, c.dups, c.errs
}

// Stop ends the watch.
func (c *Completions) Stop() { c.cc.Stop() }
