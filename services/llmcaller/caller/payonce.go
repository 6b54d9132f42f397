package caller

import (
	"context"
	"log/slog"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// flight is a Call in progress for one turn id in this process. A second
// Call for the same turn (a JetStream redelivery racing the first) waits for
// it instead of paying for the same call again.
type flight struct {
	done  chan struct{}
	res   contracts.LLMResult
	final bool
	// started is the call record an earlier delivery left, at revision
	// rev (started.go); nil when there is none.
	started *Started
	rev     uint64
}

// claim returns a stored or just-finished result for the turn, or makes this
// Call the turn's only caller in the process and returns its flight. Both are
// nil only when ctx ended while waiting.
//
// skipLookup (a first delivery, Input.FirstDelivery) reads nothing: the
// call record's create-if-absent stands in for the lookup. stored
// (Input.Stored), when set, is asked before the record: the result is kept
// there, and a call record beside it does not mean the call is unfinished.
func (c *Caller) claim(ctx context.Context, turnID string, stored func(context.Context) (*contracts.LLMResult, error), skipLookup bool, log *slog.Logger) (*contracts.LLMResult, *flight) {
	for {
		var started *Started
		var rev uint64
		if stored != nil && !skipLookup {
			cached, err := stored(ctx)
			switch {
			case err != nil:
				// As for the record below: calling again risks paying twice,
				// the record may still tell how to re-attach instead.
				log.Error("looking up the stored result failed; reading the call record", "err", err)
			case cached != nil:
				cached.Cached = true
				log.Info("LLM result found where the turn stored it: the model is not called again")
				return cached, nil
			}
		}
		if c.o.Results != nil && !skipLookup {
			var cached *contracts.LLMResult
			var err error
			if recs := c.records(); recs != nil {
				// A result here, with Stored set, was stored by a release
				// that wrote results to this store: still the turn's.
				cached, started, rev, err = recs.Lookup(ctx, turnID)
			} else {
				cached, err = c.o.Results.Get(ctx, turnID)
			}
			switch {
			case err != nil:
				// Calling again risks paying twice; failing the turn on a
				// store outage is worse, so log loudly and call.
				log.Error("pay-once lookup failed; calling the backend anyway", "err", err)
			case cached != nil:
				cached.Cached = true
				log.Info("LLM result served from the pay-once store")
				return cached, nil
			}
		}
		c.mu.Lock()
		f, busy := c.flights[turnID]
		if !busy {
			f = &flight{done: make(chan struct{}), started: started, rev: rev}
			c.flights[turnID] = f
			c.mu.Unlock()
			return nil, f
		}
		c.mu.Unlock()
		log.Info("the same turn is already being called; waiting for its result")
		select {
		case <-ctx.Done():
			return nil, nil
		case <-f.done:
		}
		if f.final {
			r := f.res
			r.Cached = true
			return &r, nil
		}
		// The other call was cancelled: its result is not this one's; go again.
	}
}

// release ends the turn's flight and hands its result to any waiter.
func (c *Caller) release(turnID string, f *flight, res contracts.LLMResult, final bool) {
	f.res, f.final = res, final
	c.mu.Lock()
	delete(c.flights, turnID)
	c.mu.Unlock()
	close(f.done)
}

// legacyRecord warns when a call about to be made has a pay-once record
// under its pre-upgrade key (the turn id alone; Input.LegacyKey). Such a
// record cannot be told from another conversation's turn of the same id,
// so answering from it could hand one conversation another's result: it is
// not used, and the model is called once more for a turn that was in
// flight at the upgrade. Only a lookup that found nothing under the new
// key (a redelivery) asks, so new turns pay nothing for it.
func (c *Caller) legacyRecord(ctx context.Context, key string, log *slog.Logger) {
	recs := c.records()
	if recs == nil {
		return
	}
	res, started, _, err := recs.Lookup(ctx, key)
	if err != nil || res == nil && started == nil {
		return
	}
	c.stats.repeated.Add(1)
	log.Warn("a pay-once record from before records were keyed by conversation exists under this turn id alone; "+
		"it may be another conversation's, so it is not used and the model is called again", "legacy_key", key)
}
