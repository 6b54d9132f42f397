// Package store holds the pipeline's state outside the event streams, each in
// JetStream: conversation continuation records (Conversations), turn
// cancellations (Cancels) and usage accounting (Usage).
package store

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

// CancelBucket is the KV bucket of turn cancellations: key = the turn's key
// (contracts.TurnKey: conversation and turn id, so a cancel never stops
// another conversation's turn of the same id), set
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
//
// The watch also delivers the cancels stored before it started, so once it
// has caught up the process knows every cancel it has been told of, and
// Watch needs no read: a cancel is either known already, or stored and not
// yet delivered, and then its delivery aborts the registered turn. Every
// turn read the bucket once before; the benchmark counts that read among a
// turn's round trips. Cancels are rare and expire with the bucket's TTL;
// past maxKnown in one process's life Watch reads the bucket again.
type Cancels struct {
	kv jetstream.KeyValue

	mu       sync.Mutex
	flight   map[string][]*tracked
	known    map[string]cancelRecord // cancels the watch has delivered
	synced   bool                    // the watch has delivered every cancel stored before it
	overflow bool                    // known outgrew limit and was dropped
	limit    int                     // maxKnown, lower in a test
	stop     func()
}

// cancelRecord is one stored cancel as the watch delivered it.
type cancelRecord struct {
	at     time.Time
	reason string
}

// maxKnown bounds the cancels a process remembers (about 200 bytes each).
const maxKnown = 100_000

// tracked is one Track of a turn (a turn may be tracked more than once in
// a process, e.g. by two resumed streams).
type tracked struct{ cancel context.CancelCauseFunc }

// ErrCancelled is the cause of a context a cancellation ended.
var ErrCancelled = errors.New("turn cancelled")

// OpenCancels opens (creating if needed) the bucket and starts the watch
// that aborts tracked turns the moment their cancellation is recorded.
func OpenCancels(ctx context.Context, js jetstream.JetStream, replicas int) (*Cancels, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: CancelBucket, Description: "Aptix: cancelled turns (conversation.turn → cancel time)",
		History: 1, TTL: cancelTTL, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", CancelBucket, err)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := kv.WatchAll(wctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("watch %s: %w", CancelBucket, err)
	}
	c := &Cancels{kv: kv, flight: map[string][]*tracked{}, known: map[string]cancelRecord{}, limit: maxKnown, stop: stop}
	go func() {
		for e := range w.Updates() {
			switch {
			case e == nil: // the stored cancels have all been delivered
				c.mu.Lock()
				c.synced = true
				c.mu.Unlock()
			case e.Operation() == jetstream.KeyValuePut:
				c.abort(e.Key(), cancelRecord{at: e.Created(), reason: reasonOf(e.Value())})
			}
		}
		// The watch ended (Close, or a subscription the client gave up
		// on): Watch reads the bucket again rather than trust it.
		c.mu.Lock()
		c.synced = false
		c.mu.Unlock()
	}()
	return c, nil
}

// reasonOf reads a stored cancel's value (CancelFor).
func reasonOf(v []byte) string {
	if r := string(v); contracts.IsToken(r) {
		return r
	}
	return CodeCancelled
}

// Close stops the watch.
func (c *Cancels) Close() { c.stop() }

// abort remembers a delivered cancel and ends the turn's tracked contexts
// (key is the turn's contracts.TurnKey).
func (c *Cancels) abort(key string, rec cancelRecord) {
	c.mu.Lock()
	if !c.overflow {
		if len(c.known) >= c.limit {
			c.known, c.overflow = nil, true
		} else {
			c.known[key] = rec
		}
	}
	fns := c.flight[key]
	delete(c.flight, key)
	c.mu.Unlock()
	for _, f := range fns {
		f.cancel(ErrCancelled)
	}
}

// Cancel records the cancellation of the conversation's turn (once: a
// second cancel keeps the first one's time and reason) and returns when it
// was recorded.
func (c *Cancels) Cancel(ctx context.Context, conv, turnID string) (time.Time, error) {
	return c.CancelFor(ctx, conv, turnID, CodeCancelled)
}

// CancelFor records a cancellation with a reason, the code the turn's
// rejection carries: CodeCancelled for a client's cancel, "timeout" for a
// background response past its time limit.
func (c *Cancels) CancelFor(ctx context.Context, conv, turnID, reason string) (time.Time, error) {
	if !contracts.IsToken(conv) || !contracts.IsToken(turnID) {
		// The key is a subject: an overlong one would close the connection.
		return time.Time{}, fmt.Errorf("cancel turn: %q/%q is not a conversation and turn id ([A-Za-z0-9_-]{1,%d})", clipID(conv), clipID(turnID), contracts.MaxIDLen)
	}
	key := contracts.TurnKey(conv, turnID)
	if _, err := c.kv.Create(ctx, key, []byte(reason)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return time.Time{}, fmt.Errorf("cancel turn %s: %w", key, err)
	}
	at, _, err := c.Cancelled(ctx, conv, turnID)
	return at, err
}

// Cancelled reports whether the conversation's turn was cancelled, and when
// (the KV server's time of the record, comparable with stream event times).
func (c *Cancels) Cancelled(ctx context.Context, conv, turnID string) (at time.Time, ok bool, err error) {
	at, _, ok, err = c.Reason(ctx, conv, turnID)
	return at, ok, err
}

// Reason is Cancelled with the cancellation's reason (CancelFor). A cancel
// stored before keys named the conversation (under the turn id alone) is
// not read: it cannot be told from another conversation's turn of that id.
func (c *Cancels) Reason(ctx context.Context, conv, turnID string) (at time.Time, reason string, ok bool, err error) {
	if !contracts.IsToken(conv) || !contracts.IsToken(turnID) {
		return at, "", false, nil // no turn has it (and the key would be no subject)
	}
	return c.reason(ctx, contracts.TurnKey(conv, turnID))
}

func (c *Cancels) reason(ctx context.Context, key string) (at time.Time, reason string, ok bool, err error) {
	e, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return at, "", false, nil
	}
	if err != nil {
		return at, "", false, fmt.Errorf("read cancel of turn %s: %w", key, err)
	}
	return e.Created(), reasonOf(e.Value()), true, nil
}

// Watch registers the turn like Track: a cancel already delivered by the
// watch is returned (reason, ok); one stored later, or stored just before
// and not yet delivered (the watch lags by a message's way through the
// server), aborts tctx while the turn is registered, so a turn that ends
// within that lag finishes as if uncancelled. It reads the bucket until the
// watch has caught up, after maxKnown cancels, and if the watch ended;
// Reason followed by Track made two reads on every turn of the LLM caller.
// On an error or a cancel, the registration is already released.
func (c *Cancels) Watch(ctx context.Context, conv, turnID string) (tctx context.Context, release func(), reason string, ok bool, err error) {
	key := contracts.TurnKey(conv, turnID)
	// Looked up and registered under one lock: a delivery in between
	// would otherwise abort nothing.
	c.mu.Lock()
	rec, known := c.known[key]
	trusted := c.synced && !c.overflow
	if !known {
		tctx, _, release = c.registerLocked(ctx, key)
	}
	c.mu.Unlock()
	if known {
		return nil, nil, rec.reason, true, nil
	}
	if trusted {
		return tctx, release, "", false, nil
	}
	_, reason, ok, err = c.reason(ctx, key)
	if err != nil || ok {
		release()
		return nil, nil, reason, ok, err
	}
	return tctx, release, "", false, nil
}

// Track returns a context that ends, with cause ErrCancelled, when the
// conversation's turn is cancelled (already, or while the returned context
// is in use); release stops tracking it.
func (c *Cancels) Track(ctx context.Context, conv, turnID string) (tctx context.Context, release func()) {
	tctx, cancel, release := c.register(ctx, contracts.TurnKey(conv, turnID))
	// Registered before the read: a cancel recorded in between is seen by
	// one of the two.
	if _, ok, _ := c.Cancelled(ctx, conv, turnID); ok {
		cancel(ErrCancelled)
	}
	return tctx, release
}

// register makes the in-flight context of the turn whose key
// (contracts.TurnKey) is key: a cancel recorded from now on aborts it
// (abort); release unregisters it.
func (c *Cancels) register(ctx context.Context, key string) (context.Context, context.CancelCauseFunc, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registerLocked(ctx, key)
}

// registerLocked is register with c.mu held.
func (c *Cancels) registerLocked(ctx context.Context, key string) (context.Context, context.CancelCauseFunc, func()) {
	tctx, cancel := context.WithCancelCause(ctx)
	me := &tracked{cancel: cancel}
	c.flight[key] = append(c.flight[key], me)
	return tctx, cancel, func() {
		c.mu.Lock()
		rest := slices.DeleteFunc(c.flight[key], func(t *tracked) bool { return t == me })
		if len(rest) == 0 {
			delete(c.flight, key)
		} else {
			c.flight[key] = rest
		}
		c.mu.Unlock()
		cancel(nil)
	}
}

// clipID shortens an id quoted in an error.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
