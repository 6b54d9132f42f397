package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// live is the page; its script follows /console/live/events.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "live", "Live", map[string]any{"Stages": layout.EventStages()})
}

// liveEvent is one event a stage stored, as the live page receives it.
type liveEvent struct {
	Stage        string `json:"stage"`
	Conversation string `json:"conversation"`
	Turn         string `json:"turn"`
	Time         string `json:"time"`
	Size         string `json:"size,omitempty"`
	// Skipped names the stages a turn entering with this event did not
	// visit (history.Skipped), so the live page never waits for them.
	Skipped string `json:"skipped,omitempty"`
}

// sse prepares a Server-Sent Events response: no write deadline (the
// stream lives as long as the page), flushed per event.
func sse(w http.ResponseWriter) (*http.ResponseController, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, false
	}
	return rc, true
}

// liveEvents streams every event stored from now on (headers only: the
// page needs the stage, conversation and turn, not the payloads), the
// requests and the APTIX stream's events, as SSE "stage" events, with
// a comment every 15 s to keep proxies from closing an idle stream.
func (c *Console) liveEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan liveEvent, 256)
	send := func(subject string, h nats.Header, at time.Time) {
		stage, conv, turn, ok := contracts.ParseSubject(subject)
		if !ok {
			return
		}
		ev := liveEvent{Stage: stage, Conversation: conv, Turn: turn, Size: h.Get(nats.MsgSize), Time: at.UTC().Format(time.RFC3339Nano),
			Skipped: h.Get(contracts.HeaderSkipped)}
		select {
		case events <- ev:
		default: // a slow page misses events rather than holding the consumer
		}
	}
	// Requests: the queue stream is a work queue, which takes no ordered
	// consumer; a core subscription sees each request as it is published.
	sub, err := c.cfg.NC.Subscribe(contracts.StageFilter(contracts.StageRequested), func(m *nats.Msg) {
		send(m.Subject, m.Header, time.Now())
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true})
	if err != nil {
		c.fail(w, r, fmt.Errorf("follow %s: %w", contracts.StreamName, err))
		return
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now()
		if md, err := m.Metadata(); err == nil {
			at = md.Timestamp
		}
		send(m.Subject(), m.Headers(), at)
	})
	if err != nil {
		c.fail(w, r, fmt.Errorf("follow %s: %w", contracts.StreamName, err))
		return
	}
	defer cc.Stop()
	rc, ok := sse(w)
	if !ok {
		return
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case ev := <-events:
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "event: stage\ndata: %s\n\n", b); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// liveText streams one turn's deltas (aptix.delta.<conv>.<turn>, core NATS:
// they are not stored) as SSE "delta" events, and a "done" event when the
// turn's completion is stored. Only a turn sent with stream: true has deltas.
func (c *Console) liveText(w http.ResponseWriter, r *http.Request) {
	conv, turn := r.URL.Query().Get("conversation"), r.URL.Query().Get("turn")
	if !validID(conv) || !validID(turn) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "conversation and turn are 1-128 characters of [A-Za-z0-9_-].")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	deltas := make(chan *nats.Msg, 1024)
	sub, err := c.cfg.NC.ChanSubscribe(contracts.DeltaSubject(conv, turn), deltas)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	done := make(chan struct{}, 1)
	if s, err := c.js.Stream(ctx, contracts.StreamName); err == nil {
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{contracts.Subject(contracts.StageCompleted, conv, turn)}, HeadersOnly: true})
		if err == nil {
			if cc, err := cons.Consume(func(jetstream.Msg) {
				select {
				case done <- struct{}{}:
				default:
				}
			}); err == nil {
				defer cc.Stop()
			}
		}
	}
	rc, ok := sse(w)
	if !ok {
		return
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case m := <-deltas:
			if !writeDelta(w, m.Data) {
				return
			}
		case <-done:
			// Deltas published before the completion may still be queued.
			for len(deltas) > 0 {
				writeDelta(w, (<-deltas).Data)
			}
			fmt.Fprintf(w, "event: done\ndata: {\"conversation\":%q,\"turn\":%q}\n\n", conv, turn)
			_ = rc.Flush()
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// writeDelta writes one delta as an SSE event, compacted onto one data
// line; a payload that is not JSON is skipped. It reports false once the
// client is gone.
func writeDelta(w http.ResponseWriter, data []byte) bool {
	var buf bytes.Buffer
	if json.Compact(&buf, data) != nil {
		return true
	}
	_, err := fmt.Fprintf(w, "event: delta\ndata: %s\n\n", buf.Bytes())
	return err == nil
}
