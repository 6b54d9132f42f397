package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
)

// The stage runtime handles one event as a chain of steps, in the spirit of
// watermill's middleware (docs/architecture.md#the-stage-runtime). A step
// does its part and passes the event on with ev.next(), or settles it: it
// returns nil (the Subscriber acknowledges the input) or an error (the
// input is redelivered after the backoff). Whatever a step settles, it
// settles before returning, so an acknowledged event always has its
// output, its error completion or its dead letter stored:
//
//	account   busy time and messaging.process.duration, around the rest
//	traced    the consumer span, the delivery count and the replay marks
//	load      claim-check load and decode; an undecodable event is dead-lettered
//	screen    a redelivered request's turn id checked for reuse before any work
//	call      the handler, and its outcome: pass on, reject, retry or give up
//	admit     the first stage waits for room in APTIX, or answers at_capacity
//	emit      the output published (first-on-subject for a new request)
var chain = [...]step{account, traced, load, screen, call, admit, emit}

// step is one link of the chain; see chain.
type step func(r *runner, ev *event) error

// event is one delivery on its way through the chain: what the steps
// before have learnt about it.
type event struct {
	r     *runner
	steps []step // the steps after the current one
	msg   *message.Message

	ctx       context.Context
	span      trace.Span
	subject   string
	delivered int
	turn      contracts.Turn
	// first is a request's first delivery: its output is published only
	// if the turn has no event yet (withExpectFirst), and the turn id is
	// looked up only when that fails or the turn is answered otherwise.
	first bool
	log   *slog.Logger
}

// handle runs the chain on one event (the watermill handler).
func (r *runner) handle(msg *message.Message) error {
	ev := &event{r: r, steps: chain[:], msg: msg}
	return ev.next()
}

// next runs the rest of the chain.
func (ev *event) next() error {
	s := ev.steps[0]
	ev.steps = ev.steps[1:]
	return s(ev.r, ev)
}

// logger is the stage's logger with the turn's ids, made on first use: the
// events that log are the few that fail.
func (ev *event) logger() *slog.Logger {
	if ev.log == nil {
		ev.log = ev.r.log.With("conversation", ev.turn.ConversationId, "turn", ev.turn.TurnId, "trace_id", ev.span.SpanContext().TraceID().String())
	}
	return ev.log
}

// account adds the event's handling time to the stage's busy time and
// records messaging.process.duration with its outcome.
func account(r *runner, ev *event) (err error) {
	start := time.Now()
	defer func() {
		r.stats.busyNanos.Add(int64(time.Since(start)))
		observeProcess(ev.msg.Context(), r.st.Name, r.st.In, start, errorType(err)) // metrics.go
	}()
	return ev.next()
}

// traced starts the consumer span, a child of the producer's context and
// linked to it, and gives the rest of the chain the delivery count
// (Delivered) and the replay and redrive marks (replay.go).
func traced(r *runner, ev *event) error {
	msg := ev.msg
	ev.subject = msg.Metadata.Get(MetaSubject)
	ev.delivered, _ = strconv.Atoi(msg.Metadata.Get(MetaDelivered))
	parent := otel.GetTextMapPropagator().Extract(msg.Context(), propagation.MapCarrier(msg.Metadata))
	ctx, span := tracing.Tracer().Start(parent, "process aptix."+r.st.In,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.LinkFromContext(parent)),
		trace.WithAttributes(tracing.MessagingAttrs("process", ev.subject, msg.UUID)...),
		trace.WithAttributes(attribute.String("messaging.consumer.group.name", r.sub.Durable), attribute.Int("messaging.nats.delivered", ev.delivered)))
	defer span.End()
	ctx = withCarried(ctx, msg.Metadata)
	ev.ctx, ev.span = context.WithValue(ctx, deliveredKey{}, ev.delivered), span
	return ev.next()
}

// load reads the event's payload, from the claim store when it was
// claim-checked, and decodes the turn. A claim the store cannot give yet
// is retried while deliveries last (on the last one the stub is decoded
// and dead-lettered). An event that does not decode is dead-lettered, and
// answered with an invalid_event completion when its subject names a turn.
func load(r *runner, ev *event) error {
	payload := ev.msg.Payload
	if key := ev.msg.Metadata.Get(contracts.HeaderClaim); key != "" {
		full, err := claim.EventData(ev.ctx, r.js, nats.Header{contracts.HeaderClaim: []string{key}}, payload)
		if err != nil {
			r.log.Warn("claimed event unreadable, will retry", "subject", ev.subject, "err", err)
			if ev.delivered < r.sub.MaxDeliver {
				return err
			}
		} else {
			payload = full
		}
	}
	turn, err := decode(r.st.In, ev.subject, payload)
	if err != nil {
		return r.undecodable(ev, err)
	}
	ev.turn = turn
	ev.span.SetAttributes(attribute.String("aptix.conversation_id", turn.ConversationId), attribute.String("aptix.turn_id", turn.TurnId))
	return ev.next()
}

// undecodable settles an event that is not a turn: its dead letter is the
// record, and a subject that names a turn gets an error completion so its
// client is answered.
func (r *runner) undecodable(ev *event, derr error) error {
	if err := r.deadLetter(ev.ctx, ev.msg, ev.delivered, derr.Error()); err != nil {
		return err // not recorded: redeliver rather than lose it
	}
	_, conv, turnID, ok := contracts.ParseSubject(ev.subject)
	if !ok || !contracts.IsToken(conv) || !contracts.IsToken(turnID) {
		return nil // nothing to answer
	}
	t := contracts.Turn{Version: contracts.TurnVersion, ConversationId: conv, TurnId: turnID, Request: contracts.AgentExecuteRequest{ConversationId: conv, TurnId: turnID}}
	return r.fail(ev.ctx, &t, CodeInvalidEvent, derr.Error())
}

// screen checks, on the stage that takes requests, that a redelivered
// request's turn id was not used by another request before any work is
// done (reuse.go): a redelivery may find its own earlier event, which only
// a lookup tells from another request's. A first delivery is not looked up
// here: its output is published only if the turn has none yet, and the
// rare conflict is looked up then (emit, or call before answering).
func screen(r *runner, ev *event) error {
	if r.st.In != contracts.StageRequested {
		return ev.next()
	}
	if ev.delivered == 1 {
		ev.first = true
		return ev.next()
	}
	if settled, err := r.answerIfReused(ev); settled {
		return err
	}
	return ev.next()
}

// answerIfReused looks the turn id up: settled is true when the lookup
// failed (err: retry rather than answer twice) or found another request
// (answered turn_id_reused, err the answer's publish).
func (r *runner) answerIfReused(ev *event) (settled bool, err error) {
	prev, err := r.recordedRequest(ev.ctx, ev.turn.ConversationId, ev.turn.TurnId)
	if err != nil {
		return true, err
	}
	if prev == nil || turnreuse.SameRequest(*prev, ev.turn.Request) {
		return false, nil
	}
	r.stats.rejected.Add(1)
	ev.logger().Warn("turn id reused with a different request", "code", contracts.CodeTurnIDReused)
	return true, r.failReused(ev.ctx, &ev.turn)
}

// outcome is what becomes of an event after its handler or its publish.
type outcome int

const (
	pass   outcome = iota // go on
	reject                // end the turn with the Rejection's error completion
	retry                 // redeliver after the backoff
	giveUp                // dead-letter the event and end the turn with stage_failed
)

// handlerOutcome classifies a handler's result: a Rejection is final, any
// other error is retried until the last delivery.
func handlerOutcome(err error, delivered, maxDeliver int) outcome {
	var rej *Rejection
	switch {
	case err == nil:
		return pass
	case errors.As(err, &rej):
		return reject
	case delivered >= maxDeliver:
		return giveUp
	}
	return retry
}

// publishOutcome classifies a failed publish of the output: an event that
// cannot be stored (a Rejection: too large) is final; a full stream is
// waited out whatever the delivery count (backpressure, never a loss);
// anything else is retried until the last delivery.
func publishOutcome(err error, delivered, maxDeliver int) outcome {
	var rej *Rejection
	switch {
	case err == nil:
		return pass
	case errors.As(err, &rej):
		return reject
	case delivered < maxDeliver || backpressure.IsAtCapacity(err):
		return retry
	}
	return giveUp
}

// call runs the handler (a panic is an error) and acts on its outcome: a
// turn whose output the handler stored itself (Emit, Emitted) is done here;
// otherwise it goes on, is answered with its rejection, retried, or on its
// last delivery dead-lettered and answered stage_failed. A request's first
// delivery that would be answered here is first checked for a reused turn
// id, which is answered turn_id_reused instead.
func call(r *runner, ev *event) error {
	ctx, emitted := withEmit(ev.ctx, r) // emit.go
	ev.ctx = ctx
	herr := r.safeHandle(ctx, &ev.turn)
	if emitted.done {
		return r.afterEmit(ev, herr)
	}
	o := handlerOutcome(herr, ev.delivered, r.sub.MaxDeliver)
	if ev.first && o != pass {
		if settled, err := r.answerIfReused(ev); settled {
			return err
		}
	}
	switch o {
	case reject:
		var rej *Rejection
		errors.As(herr, &rej)
		r.stats.rejected.Add(1)
		ev.logger().Warn("turn rejected", "code", rej.Code, "reason", rej.Message)
		r.stats.fail(rej.Error())
		ev.span.SetStatus(codes.Error, rej.Error())
		return r.fail(ev.ctx, &ev.turn, rej.Code, rej.Message)
	case giveUp:
		reason := fmt.Sprintf("gave up after %d deliveries: %v", ev.delivered, herr)
		ev.logger().Error("turn dead-lettered", "reason", reason)
		ev.span.SetStatus(codes.Error, reason)
		return r.giveUp(ev, reason)
	case retry:
		r.stats.retried.Add(1)
		ev.logger().Warn("stage failed, will retry", "err", herr, "delivered", ev.delivered, "retry_in", r.sub.BackoffFor(ev.delivered))
		ev.span.RecordError(herr)
		ev.span.SetStatus(codes.Error, herr.Error())
		return herr
	}
	if r.o.BeforePublish != nil {
		if err := r.o.BeforePublish(&ev.turn); err != nil {
			return err
		}
	}
	return ev.next()
}

// afterEmit ends the handling of an event whose output the handler
// already stored (Emit, Emitted): it is never published again. What failed
// after that (the handler's bookkeeping) is retried while deliveries last,
// then logged and given up: the turn itself is done.
func (r *runner) afterEmit(ev *event, herr error) error {
	switch handlerOutcome(herr, ev.delivered, r.sub.MaxDeliver) {
	case reject, giveUp:
		ev.logger().Error("work after the stored output failed; the turn is done without it", "err", herr, "delivered", ev.delivered)
		r.stats.fail(herr.Error())
	case retry:
		r.stats.retried.Add(1)
		ev.logger().Warn("work after the stored output failed, will retry", "err", herr, "delivered", ev.delivered)
		return herr
	}
	if r.o.BeforePublish != nil {
		if err := r.o.BeforePublish(&ev.turn); err != nil {
			return err
		}
	}
	r.stats.processed.Add(1)
	return nil
}

// giveUp keeps the event as a dead letter with the reason, then ends the
// turn with a stage_failed completion. A dead letter that cannot be stored
// redelivers the event rather than lose it.
func (r *runner) giveUp(ev *event, reason string) error {
	if err := r.deadLetter(ev.ctx, ev.msg, ev.delivered, reason); err != nil {
		return err
	}
	return r.fail(ev.ctx, &ev.turn, CodeStageFailed, r.st.Name+" "+reason)
}

// admit holds a new turn until APTIX has room for it, on the stage that
// brings turns in (capacity.go); after AdmitTimeout the turn is answered
// at_capacity instead of held. Other stages pass at once.
func admit(r *runner, ev *event) error {
	if r.admit == nil {
		return ev.next()
	}
	err := r.admit.wait(ev.ctx, ev.logger())
	switch {
	case err == nil:
		return ev.next()
	case !errors.Is(err, ErrAdmitTimeout):
		return err
	}
	// Answered, not held: the client is told to retry later.
	r.stats.rejected.Add(1)
	ev.logger().Warn("turn refused: no room in APTIX", "code", CodeAtCapacity, "err", err)
	r.stats.fail(err.Error())
	return r.fail(ev.ctx, &ev.turn, CodeAtCapacity, "Aptix is at capacity: "+err.Error()+"; retry later")
}

// emit publishes the output on the stage Route (or Out) picks and counts
// the event processed. A request's first delivery publishes only if the
// turn has no event yet; when it has one, the turn id is looked up: another
// request's is answered turn_id_reused, this request's own (sent again past
// the queue's de-duplication window) is published again as usual. A publish
// that fails is classified by publishOutcome.
func emit(r *runner, ev *event) error {
	out := r.route(&ev.turn)
	err := r.publish(withExpectFirst(ev.ctx, ev.first), out, &ev.turn)
	if ev.first && errors.Is(err, errNotFirst) {
		// The turn has a retrieved event already (another request's, or
		// this one's sent again past the queue's de-duplication window),
		// or the event is too large to publish before the check.
		if settled, err := r.answerIfReused(ev); settled {
			return err
		}
		err = r.publish(ev.ctx, out, &ev.turn)
	}
	if err == nil {
		r.stats.processed.Add(1)
		return nil
	}
	ev.span.RecordError(err)
	switch publishOutcome(err, ev.delivered, r.sub.MaxDeliver) {
	case reject:
		// The event cannot be stored (too large): final, not retried.
		var rej *Rejection
		errors.As(err, &rej)
		r.stats.rejected.Add(1)
		ev.logger().Warn("turn rejected: its output cannot be stored", "code", rej.Code, "reason", rej.Message)
		r.stats.fail(rej.Error())
		return r.fail(ev.ctx, &ev.turn, rej.Code, rej.Message)
	case retry:
		return err
	}
	if ev.first {
		if settled, err := r.answerIfReused(ev); settled {
			return err
		}
	}
	// A publish that keeps failing for another reason than a full stream
	// (the claim store broken, a permission) ends the turn loudly instead
	// of leaving it undelivered.
	reason := fmt.Sprintf("publishing aptix.%s failed on all %d deliveries: %v", out, ev.delivered, err)
	ev.logger().Error("turn dead-lettered", "reason", reason)
	return r.giveUp(ev, reason)
}
