package console

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// follower keeps the headers of the newest windowEvents events of the APTIX
// stream in memory, so the overview reads no stream at all: one ordered
// consumer (headers only, no payloads) starts where the window starts and
// follows new events. It starts with the first overview and stops after
// followIdle without one, so a gateway nobody looks at does not follow.
type follower struct {
	js jetstream.JetStream

	mu      sync.Mutex
	ring    []observed // the newest events: a ring of windowEvents, next is the oldest once full
	next    int
	lastUse time.Time
	cc      jetstream.ConsumeContext
	ready   chan struct{} // closed once the start of the window is read
	cancel  context.CancelFunc
}

// observed is what the overview needs of an event.
type observed struct {
	seq               uint64
	at                time.Time
	stage, conv, turn string
}

const followIdle = 10 * time.Minute

// snapshot returns the window's events, starting the follower when it is
// not running and waiting (up to wait) for it to read the window's start.
func (f *follower) snapshot(ctx context.Context, wait time.Duration) ([]observed, error) {
	f.mu.Lock()
	f.lastUse = time.Now()
	if f.cc == nil {
		if err := f.start(ctx); err != nil {
			f.mu.Unlock()
			return nil, err
		}
	}
	ready := f.ready
	f.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]observed, 0, len(f.ring))
	if len(f.ring) == windowEvents {
		out = append(out, f.ring[f.next:]...)
		return append(out, f.ring[:f.next]...), nil
	}
	return append(out, f.ring...), nil
}

// start begins following (f.mu held).
func (f *follower) start(ctx context.Context) error {
	s, err := f.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return err
	}
	st := s.CachedInfo().State
	start := max(st.FirstSeq, 1)
	if st.LastSeq >= windowEvents && st.LastSeq-windowEvents+1 > start {
		start = st.LastSeq - windowEvents + 1
	}
	bg, cancel := context.WithCancel(context.Background())
	cons, err := s.OrderedConsumer(bg, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, HeadersOnly: true})
	if err != nil {
		cancel()
		return err
	}
	ready := make(chan struct{})
	var once sync.Once
	if st.Msgs == 0 || st.LastSeq < start {
		once.Do(func() { close(ready) })
	}
	f.ring, f.next, f.ready, f.cancel = make([]observed, 0, windowEvents), 0, ready, cancel
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		o := observed{seq: md.Sequence.Stream, at: md.Timestamp}
		if stage, conv, turn, ok := contracts.ParseSubject(m.Subject()); ok {
			o.stage, o.conv, o.turn = stage, conv, turn
		} else if strings.HasPrefix(m.Subject(), contracts.DeadPrefix+".") {
			o.stage = "dead"
		}
		f.mu.Lock()
		if len(f.ring) < windowEvents {
			f.ring = append(f.ring, o)
		} else {
			f.ring[f.next] = o
			f.next = (f.next + 1) % windowEvents
		}
		f.mu.Unlock()
		if md.Sequence.Stream >= st.LastSeq || md.NumPending == 0 {
			once.Do(func() { close(ready) })
		}
	}, jetstream.PullMaxMessages(fetchBatch))
	if err != nil {
		cancel()
		return err
	}
	f.cc = cc
	go f.idle(bg)
	return nil
}

// idle stops the follower after followIdle without an overview.
func (f *follower) idle(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.mu.Lock()
			if time.Since(f.lastUse) > followIdle {
				f.stopLocked()
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
		}
	}
}

func (f *follower) stopLocked() {
	if f.cc != nil {
		f.cc.Stop()
		f.cc = nil
	}
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
}

// stop ends the follower (Console.Close).
func (f *follower) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopLocked()
}
