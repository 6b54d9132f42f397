package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ErrAtCapacity is wrapped by a publish the server refused because its
// stream is full (discard "new"): backpressure, not loss. Clients show it
// and exit non-zero (the HTTP gateway answers 503 with Retry-After); stages
// retry with backoff without acknowledging their input.
var ErrAtCapacity = errors.New("aptix is at capacity: the stream is full, retry later")

// jsErrStoreFailed is JetStream's error code for a store refused by a limit
// ("maximum bytes exceeded", "maximum messages exceeded").
const jsErrStoreFailed = 10077

// IsAtCapacity reports whether err is a publish refused by a full stream.
func IsAtCapacity(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAtCapacity) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == jsErrStoreFailed {
		return true
	}
	// nats.go sometimes flattens the API error into its text.
	msg := err.Error()
	return strings.Contains(msg, "maximum bytes exceeded") || strings.Contains(msg, "maximum messages exceeded") ||
		strings.Contains(msg, "insufficient resources")
}

// capacityError wraps a refused publish so callers can test for ErrAtCapacity.
func capacityError(err error) error {
	if err != nil && IsAtCapacity(err) && !errors.Is(err, ErrAtCapacity) {
		return &atCapacity{err: err}
	}
	return err
}

type atCapacity struct{ err error }

func (e *atCapacity) Error() string   { return ErrAtCapacity.Error() + ": " + e.err.Error() }
func (e *atCapacity) Unwrap() []error { return []error{ErrAtCapacity, e.err} }

// untilStored retries publish while the stream is full, with growing delays,
// until it is stored, fails otherwise, or ctx ends. A stage calls it before
// acknowledging its input, so a full stream holds the turn where it is.
func untilStored(ctx context.Context, log *slog.Logger, what string, publish func() error) error {
	wait := 100 * time.Millisecond
	var since time.Time
	for {
		err := publish()
		if err == nil || !IsAtCapacity(err) {
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
			return capacityError(err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// admission lets the first stage bring a new turn into APTIX only while
// APTIX has room for turns already inside to move (StreamConfig.admitBelow).
// The stream's size is read at most every interval and shared by every
// handler of the process.
type admission struct {
	stream   string
	js       jetstream.JetStream
	below    int64
	interval time.Duration

	mu      sync.Mutex
	checked time.Time
	bytes   int64
	avg     int64 // the stream's average event size at the last read
	logged  time.Time
}

func newAdmission(js jetstream.JetStream, c StreamConfig) *admission {
	return &admission{stream: c.JetStreamConfig().Name, js: js, below: c.admitBelow(), interval: 100 * time.Millisecond}
}

// wait returns once APTIX is below its admission mark, or ctx's error.
func (a *admission) wait(ctx context.Context, log *slog.Logger) error {
	delay := 50 * time.Millisecond
	for {
		used, err := a.used(ctx)
		if err != nil {
			return nil // cannot tell: the server's hard cap still protects the stream
		}
		if used < a.below {
			a.admitted()
			return nil
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

// admitted counts a turn just let in until the next read of the stream: its
// event and the next one it will need (as used estimates them). Without it
// every handler of the process admitted on the same cached size for a whole
// interval, and a fast first stage let in enough turns at once to fill the
// stream with work that could not move (the capacity test stalled 1 run in
// 3 once the stages got faster).
func (a *admission) admitted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bytes += 2 * max(a.avg, minEventEstimate)
}

// minEventEstimate stands in for the average event size before the stream
// holds any event.
const minEventEstimate = 1024

// used is APTIX's size plus the next event of every turn a stage holds or
// has yet to take (estimated at the stream's average event size): a turn
// inside grows by one event before its previous one can be trimmed, so
// admitting on the size alone could fill the stream with work that then
// cannot move.
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
		avg := int64(st.Bytes / st.Msgs)
		a.avg = avg
		for _, stage := range Stages {
			if contracts.StreamOf(stage.In) != a.stream {
				continue
			}
			c, err := s.Consumer(ctx, Durable(stage.Name))
			if err != nil {
				continue
			}
			ci := c.CachedInfo()
			used += int64(ci.NumPending+uint64(ci.NumAckPending)) * avg
		}
	}
	a.bytes, a.checked = used, time.Now()
	return a.bytes, nil
}
