package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// DeltaStream keeps the LLM caller's deltas (core NATS publishes on
// aptix.delta.>, which a stream on those subjects stores as they pass):
// a background stream is rebuilt from them, so a client that reconnects
// with starting_after resumes exactly where it left off, on any replica.
const DeltaStream = "APTIX_DELTAS"

// deltaMaxAge is how long a stored stream can be resumed.
const deltaMaxAge = 24 * time.Hour

func ensureDeltaStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: DeltaStream, Description: "Aptix: streamed deltas, kept so a background stream can be resumed",
		Subjects: []string{contracts.DeltaPrefix + ".>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: deltaMaxAge,
		MaxBytes: 1 << 30, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", DeltaStream, err)
	}
	return st, nil
}

// Resume streams a stored (background) response's events: response.queued,
// response.in_progress when the turn starts, its deltas as stored, then
// the done events and the terminal event of the response as it ends
// (cancelled if a cancel won). Every event carries its sequence number,
// a function of what is stored, so every replica and every reconnection
// numbers the events the same way: a door skips those its client has
// (starting_after). emit writes events; finished reports that the
// terminal event was emitted (false when caller ended first). The error
// is one before any event.
func (a *App) Resume(caller context.Context, meta *responses.Meta, emit func([]responses.Event)) (finished bool, e *responses.Error) {
	ctx, cancel := context.WithTimeout(caller, a.cfg.SyncTimeout)
	defer cancel()
	deltas := make(chan jetstream.Msg, 1024)
	cons, err := a.deltas.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.DeltaSubject(meta.ConversationID, meta.TurnID)},
	})
	if err != nil {
		return false, a.BusError(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case deltas <- m:
		case <-ctx.Done(): // the writer is gone: never block the consumer
		}
	})
	if err != nil {
		return false, a.BusError(err)
	}
	defer cc.Stop()
	done := make(chan error, 1)
	streamed := false // the LLM caller streamed: its last delta is a done delta
	go func() {
		t, err := client.Await(ctx, a.js, meta.ConversationID, meta.TurnID)
		streamed = err == nil && t.LLM != nil && t.LLM.Streamed
		done <- err
	}()

	// A cancel ends the stream even when no completion follows soon (the
	// stages may be down): after a grace for the turn's own completion,
	// the stream closes with the response as it then reads.
	cancelled, release := a.cancels.Track(ctx, meta.ConversationID, meta.TurnID)
	defer release()
	var grace <-chan time.Time

	st := responses.NewStreamer()
	emit(st.Queued(responses.Current(*meta, responses.State{})))
	started := false
	start := func() {
		if !started {
			started = true
			emit(st.InProgress(responses.Current(*meta, responses.State{})))
		}
	}
	var lastSeq uint64
	onDelta := func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			lastSeq = md.Sequence.Stream
		}
		var d responses.Delta
		if json.Unmarshal(m.Data(), &d) == nil && (d.Type == "text" || d.Type == "arguments") {
			start()
			emit(st.Delta(d))
		}
	}
	for {
		select {
		case m := <-deltas:
			onDelta(m)
		case err := <-done:
			if err != nil {
				failed := responses.Pending(*meta, responses.StatusFailed)
				failed.Error = &responses.ResponseError{Code: "timeout", Message: fmt.Sprintf("no completion within %s: %v; GET /v1/responses/%s later", a.cfg.SyncTimeout, err, meta.ID)}
				emit(st.Finish(failed))
				return true, nil
			}
			// Read up to the last delta, so the sequence does not depend on
			// timing. Deltas are core publishes the delta stream stores as
			// they pass, on its own queue: under load the completion can
			// arrive before the last of them is stored, so a streamed turn
			// waits (boundedly) for its done delta.
			if last, err := a.lastDelta(ctx, meta, streamed); err == nil {
				for lastSeq < last.Sequence {
					select {
					case m := <-deltas:
						onDelta(m)
					case <-ctx.Done():
						return false, nil
					}
				}
			} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
				a.log.Warn("read last delta", "response", meta.ID, "err", err)
			}
			final, err := a.current(context.WithoutCancel(ctx), meta)
			if err != nil {
				final = responses.Pending(*meta, responses.StatusFailed)
				final.Error = &responses.ResponseError{Code: "read_failed", Message: err.Error()}
			}
			start()
			emit(st.Finish(final))
			return true, nil
		case <-cancelled.Done():
			if grace == nil && errors.Is(context.Cause(cancelled), store.ErrCancelled) {
				grace = time.After(cancelGrace)
			}
			cancelled = context.Background() // seen: stop selecting it
		case <-grace:
			final, err := a.current(context.WithoutCancel(ctx), meta)
			if err != nil || !responses.Terminal(final.Status) {
				grace = time.After(cancelGrace)
				continue
			}
			start()
			emit(st.Finish(final))
			return true, nil
		case <-caller.Done():
			return false, nil
		}
	}
}

// lastDelta is the turn's last stored delta; with streamed, it waits up to
// deltaSettle for the done delta the LLM caller sends last.
func (a *App) lastDelta(ctx context.Context, meta *responses.Meta, streamed bool) (*jetstream.RawStreamMsg, error) {
	subject := contracts.DeltaSubject(meta.ConversationID, meta.TurnID)
	deadline := time.Now().Add(deltaSettle)
	for {
		last, err := a.deltas.GetLastMsgForSubject(ctx, subject)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, err
		}
		if err == nil {
			var d responses.Delta
			if !streamed || json.Unmarshal(last.Data, &d) == nil && d.Type == "done" {
				return last, nil
			}
		}
		if !streamed || time.Now().After(deadline) {
			if err == nil {
				return last, nil
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// deltaSettle bounds the wait for a streamed turn's last delta to be
// stored after its completion arrived.
const deltaSettle = 2 * time.Second

// cancelGrace is how long a stream waits, after a cancel, for the turn's
// own completion before it ends with the cancelled response.
const cancelGrace = 2 * time.Second
