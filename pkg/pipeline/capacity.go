package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// untilStored retries publish while the stream is full, with growing delays,
// until it is stored, fails otherwise, or ctx ends. A stage calls it before
// acknowledging its input, so a full stream holds the turn where it is.
func untilStored(ctx context.Context, log *slog.Logger, what string, publish func() error) error {
	wait := 100 * time.Millisecond
	var since time.Time
	for {
		err := publish()
		if err == nil || !backpressure.IsAtCapacity(err) {
			return err
		}
		if since.IsZero() {
			since = time.Now()
			log.Debug("stream full: holding the turn and retrying", "publish", what, "err", err)
		} else if time.Since(since) > 30*time.Second {
			since = time.Now()
			log.Warn("stream still full after 30 s: holding the turn and retrying", "publish", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return backpressure.Wrap(err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// ErrAdmitTimeout is the failure of a turn that waited AdmitTimeout for room
// in APTIX: it is answered with a CodeAtCapacity error completion instead of
// waiting in the queue for as long as the stream stays full.
var ErrAdmitTimeout = errors.New("no room in APTIX for a new turn within the admission timeout")

// CodeAtCapacity is the error code of a turn refused for lack of room after
// it was queued (the gateway answers it 503 with Retry-After).
const CodeAtCapacity = "at_capacity"

// admission lets the first stage bring a new turn into APTIX only while
// APTIX has room for every turn already inside to finish
// (layout.StreamConfig.AdmitBelow): its stored bytes plus, for every turn a
// stage holds or has yet to take, the events that turn will still add up to its
// completion, each estimated at the larger of the stream's average event
// size and its latest completion's (a turn's events grow stage by stage). A
// turn's earlier events can be trimmed only once the next stage has them,
// and completions not before CompletionGrace, so admitting on the size alone
// (or on one more event per turn) let the stream fill with turns that could
// not move: paid model calls whose answers could not be stored. The stream's
// size is read at most every interval and shared by every handler of the
// process.
type admission struct {
	stream   string
	js       jetstream.JetStream
	below    int64
	timeout  time.Duration
	interval time.Duration

	mu      sync.Mutex
	checked time.Time
	bytes   int64
	est     int64 // the estimated size of one event at the last read
	logged  time.Time
}

func newAdmission(js jetstream.JetStream, c layout.StreamConfig) *admission {
	c = c.Limits()
	return &admission{stream: c.JetStreamConfig().Name, js: js, below: c.AdmitBelow(), timeout: c.AdmitTimeout, interval: 100 * time.Millisecond}
}

// eventsLeft is how many more events a turn waiting at a stage adds to
// APTIX up to and including its completion (layout.EventsToEnd). A tool
// round adds two more per round; the half of the work room above the
// admission mark absorbs those and events larger than the estimate.
func eventsLeft(stage string) int64 { return int64(layout.EventsToEnd(stage)) }

// eventsPerTurn is what a turn just admitted adds: an event per stage of
// the main line (retrieved, enveloped, responded and completed).
var eventsPerTurn = int64(len(layout.MainLine()))

// wait returns once APTIX is below its admission mark, ErrAdmitTimeout after
// AdmitTimeout without room, or ctx's error.
func (a *admission) wait(ctx context.Context, log *slog.Logger) error {
	delay := 50 * time.Millisecond
	deadline := time.Now().Add(a.timeout)
	for {
		used, err := a.used(ctx)
		if err != nil {
			return nil // cannot tell: the server's hard cap still protects the stream
		}
		if used < a.below {
			a.admitted()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s; APTIX_ADMIT_TIMEOUT)", ErrAdmitTimeout, a.timeout)
		}
		a.mu.Lock()
		if time.Since(a.logged) > 5*time.Second {
			a.logged = time.Now()
			log.Warn("APTIX is near its cap: holding new turns until history is trimmed or work drains", "bytes_with_work_ahead", used, "admit_below", a.below)
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// now admits a turn if APTIX is below its mark at this moment, without
// waiting: the Entrance queues a turn it cannot admit at once, and the queue
// holds it as it holds every request. A size it cannot read admits nothing
// (the queue's first stage decides then).
func (a *admission) now(ctx context.Context) bool {
	used, err := a.used(ctx)
	if err != nil || used >= a.below {
		return false
	}
	a.admitted()
	return true
}

// admitted counts a turn just let in until the next read of the stream: all
// its events (as used estimates them). Without it every handler of the
// process admitted on the same cached size for a whole interval, and a fast
// first stage let in enough turns at once to fill the stream with work that
// could not move.
func (a *admission) admitted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bytes += eventsPerTurn * max(a.est, minEventEstimate)
}

// minEventEstimate stands in for the event size before the stream holds
// any event.
const minEventEstimate = 1024

// used is APTIX's size plus what every turn inside will still add (see
// admission).
func (a *admission) used(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.checked) < a.interval {
		return a.bytes, nil
	}
	s, err := a.js.Stream(ctx, a.stream)
	if err != nil {
		return 0, err
	}
	st := s.CachedInfo().State
	used := int64(st.Bytes)
	if st.Msgs > 0 {
		est := int64(st.Bytes / st.Msgs)
		if m, err := s.GetLastMsgForSubject(ctx, contracts.StageFilter(contracts.StageCompleted)); err == nil {
			est = max(est, int64(len(m.Data)+len(m.Subject)+headerSize(m.Header)))
		}
		a.est = est
		for _, stage := range layout.Stages {
			left := eventsLeft(stage.Name)
			if contracts.StreamOf(stage.In) != a.stream || left == 0 {
				continue
			}
			c, err := s.Consumer(ctx, layout.Durable(stage.Name))
			if err != nil {
				continue
			}
			ci := c.CachedInfo()
			used += int64(ci.NumPending+uint64(ci.NumAckPending)) * left * est
		}
	}
	a.bytes, a.checked = used, time.Now()
	return a.bytes, nil
}

// headerSize approximates a message's stored header bytes.
func headerSize(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
