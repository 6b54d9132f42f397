package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// CancelBucket is the KV bucket of turn cancellations: key = turn id, set
// once (Create) by whoever cancels, read by the LLM caller before it calls
// the model and watched while it calls, and by a gateway deriving a
// response's status. A cancel is a fact in the bus, not a message to one
// process, so it holds across replicas, restarts and redeliveries.
const CancelBucket = "aptix_cancels"

// CodeCancelled is the rejection code of a turn cancelled before or during
// its model call.
const CodeCancelled = "cancelled"

// cancelTTL keeps a cancellation as long as a turn can still be delivered.
const cancelTTL = 7 * 24 * time.Hour

// Cancels reads, records and watches turn cancellations. One per process:
// it holds one KV watch however many turns are in flight.
type Cancels struct {
	kv jetstream.KeyValue

	mu     sync.Mutex
	flight map[string][]*tracked
	stop   func()
}

// tracked is one Track of a turn (a turn may be tracked more than once in
// a process, e.g. by two resumed streams).
type tracked struct{ cancel context.CancelCauseFunc }

// ErrCancelled is the cause of a context a cancellation ended.
var ErrCancelled = errors.New("turn cancelled")

// OpenCancels opens (creating if needed) the bucket and starts the watch
// that aborts tracked turns the moment their cancellation is recorded.
func OpenCancels(ctx context.Context, js jetstream.JetStream, replicas int) (*Cancels, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: CancelBucket, Description: "Aptix: cancelled turns (turn id → cancel time)",
		History: 1, TTL: cancelTTL, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", CancelBucket, err)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := kv.WatchAll(wctx, jetstream.UpdatesOnly())
	if err != nil {
		stop()
		return nil, fmt.Errorf("watch %s: %w", CancelBucket, err)
	}
	c := &Cancels{kv: kv, flight: map[string][]*tracked{}, stop: stop}
	go func() {
		for e := range w.Updates() {
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				c.abort(e.Key())
			}
		}
	}()
	return c, nil
}

// Close stops the watch.
func (c *Cancels) Close() { c.stop() }

func (c *Cancels) abort(turnID string) {
	c.mu.Lock()
	fns := c.flight[turnID]
	delete(c.flight, turnID)
	c.mu.Unlock()
	for _, f := range fns {
		f.cancel(ErrCancelled)
	}
}

// Cancel records the cancellation of turnID (once: a second cancel keeps
// the first one's time and reason) and returns when it was recorded.
func (c *Cancels) Cancel(ctx context.Context, turnID string) (time.Time, error) {
	return c.CancelFor(ctx, turnID, CodeCancelled)
}

// CancelFor records a cancellation with a reason, the code the turn's
// rejection carries: CodeCancelled for a client's cancel, "timeout" for a
// background response past its time limit.
func (c *Cancels) CancelFor(ctx context.Context, turnID, reason string) (time.Time, error) {
	if _, err := c.kv.Create(ctx, turnID, []byte(reason)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return time.Time{}, fmt.Errorf("cancel turn %s: %w", turnID, err)
	}
	at, _, err := c.Cancelled(ctx, turnID)
	return at, err
}

// Cancelled reports whether turnID was cancelled, and when (the KV
// server's time of the record, comparable with stream event times).
func (c *Cancels) Cancelled(ctx context.Context, turnID string) (at time.Time, ok bool, err error) {
	at, _, ok, err = c.Reason(ctx, turnID)
	return at, ok, err
}

// Reason is Cancelled with the cancellation's reason (CancelFor).
func (c *Cancels) Reason(ctx context.Context, turnID string) (at time.Time, reason string, ok bool, err error) {
	e, err := c.kv.Get(ctx, turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return at, "", false, nil
	}
	if err != nil {
		return at, "", false, fmt.Errorf("read cancel of turn %s: %w", turnID, err)
	}
	reason = string(e.Value())
	if !contracts.IsToken(reason) {
		reason = CodeCancelled
	}
	return e.Created(), reason, true, nil
}

// Watch registers the turn like Track and then reads its cancel once: a
// cancel stored before the read is returned (reason, ok), one stored after
// it aborts tctx. One KV read where Reason followed by Track made two (the
// LLM caller did both on every turn). On an error or a cancel, the
// registration is already released.
func (c *Cancels) Watch(ctx context.Context, turnID string) (tctx context.Context, release func(), reason string, ok bool, err error) {
	tctx, _, release = c.register(ctx, turnID)
	_, reason, ok, err = c.Reason(ctx, turnID)
	if err != nil || ok {
		release()
		return nil, nil, reason, ok, err
	}
	return tctx, release, "", false, nil
}

// Track returns a context that ends, with cause ErrCancelled, when turnID
// is cancelled (already, or while the returned context is in use); release
// stops tracking it.
func (c *Cancels) Track(ctx context.Context, turnID string) (tctx context.Context, release func()) {
	tctx, cancel, release := c.register(ctx, turnID)
	// Registered before the read: a cancel recorded in between is seen by
	// one of the two.
	if _, ok, _ := c.Cancelled(ctx, turnID); ok {
		cancel(ErrCancelled)
	}
	return tctx, release
}

// register makes turnID's in-flight context: a cancel recorded from now on
// aborts it (abort); release unregisters it.
func (c *Cancels) register(ctx context.Context, turnID string) (context.Context, context.CancelCauseFunc, func()) {
	tctx, cancel := context.WithCancelCause(ctx)
	me := &tracked{cancel: cancel}
	c.mu.Lock()
	c.flight[turnID] = append(c.flight[turnID], me)
	c.mu.Unlock()
	return tctx, cancel, func() {
		c.mu.Lock()
		rest := slices.DeleteFunc(c.flight[turnID], func(t *tracked) bool { return t == me })
		if len(rest) == 0 {
			delete(c.flight, turnID)
		} else {
			c.flight[turnID] = rest
		}
		c.mu.Unlock()
		cancel(nil)
	}
}
