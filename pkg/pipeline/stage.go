// Package pipeline is the one way an Aptix stage runs on NATS JetStream: a
// watermill Router over durable pull consumers (subscriber.go, publisher.go),
// with tracing, bounded retries with growing delays, dead letters, error
// completions and graceful drain around every stage's handler (stage.go,
// and chain.go for the steps an event goes through).
// The four services supply only a Handler; nothing here knows AGN-00x.
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Version is reported by every stage's micro service.
const Version = "0.1.0"

// Handler does one stage's work on a turn: it fills the turn's section and
// returns nil to pass the turn on, a *Rejection to end the turn with an error
// completion, or any other error to have the event redelivered later.
type Handler func(ctx context.Context, turn *contracts.Turn) error

// Rejection ends a turn: the input is wrong and retrying cannot help.
type Rejection struct{ Code, Message string }

func (r *Rejection) Error() string { return r.Code + ": " + r.Message }

// Reject returns a Rejection with a formatted message.
func Reject(code, format string, args ...any) error {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes the runtime itself assigns.
const (
	CodeInvalidEvent   = "invalid_event"
	CodeInvalidRequest = "invalid_request"
	CodeStageFailed    = "stage_failed"
	// CodeEventTooLarge ends a turn whose next event is larger than the
	// pipeline stores (Publisher, APTIX_MAX_EVENT_BYTES).
	CodeEventTooLarge = "event_too_large"
)

// Stage is one pipeline stage: the event stage it consumes, the one it
// produces, and its handler.
type Stage struct {
	Name    string // service name: retriever, envelope, llmcaller, mapper
	In, Out string // event stages, e.g. contracts.StageRequested → contracts.StageRetrieved
	Handle  Handler
	// Route, when set, picks the event stage a handled turn goes to instead
	// of Out: the server-side tool loop (docs/architecture.md#the-server-side-tool-loop) sends a turn whose
	// model called a server-side tool to the toolrunner, and its results
	// back to the LLM caller.
	Route func(t *contracts.Turn) string
	// Counters, when set, adds the stage's own counters to its micro
	// service stats (e.g. the LLM caller's re-attached and repeated calls).
	Counters func() map[string]int64
	// Local caps the stage's events in flight at LocalMaxAckPending, as
	// the topology declares for the stages that wait only on the bus
	// (layout.StageSpec.Local); a stage the topology does not name (a test's)
	// can ask for it here.
	Local bool
}

// isLocal says whether a stage takes at most LocalMaxAckPending events at once.
func isLocal(st Stage) bool {
	spec, ok := layout.StageByName(st.Name)
	return st.Local || ok && spec.Local
}

// LocalMaxAckPending is the in-flight cap of a Local stage (Stage.Local):
// the default MaxAckPending, which already keeps the bus busy.
const LocalMaxAckPending = 256

// Options configure Run. Zero values take the defaults.
type Options struct {
	Stream     layout.StreamConfig
	Subscriber SubscriberConfig
	Logger     *slog.Logger
	// Ready is closed when the stage consumes.
	Ready chan struct{}
	// BeforePublish runs after the handler and before the publish; tests use
	// it to crash a stage at the worst moment.
	BeforePublish func(turn *contracts.Turn) error
	// Trim runs the history trimmer (trim.go) in this stage's process. The
	// mapper's binary and `aptix up` set it; any number of trimmers is safe.
	Trim bool
}

// runner is one running stage.
type runner struct {
	st  Stage
	o   Options
	sub SubscriberConfig
	pub *Publisher
	js  jetstream.JetStream
	log *slog.Logger
	// admit is set on the stage that brings new turns into APTIX.
	admit *admission
	stats workStats
	// events is the APTIX stream's handle, fetched once (recordedRequest).
	eventsMu sync.Mutex
	events   jetstream.Stream
}

// recordedRequest looks a turn id up on the kept stream handle.
func (r *runner) recordedRequest(ctx context.Context, conv, turnID string) (*contracts.AgentExecuteRequest, error) {
	r.eventsMu.Lock()
	s := r.events
	r.eventsMu.Unlock()
	if s == nil {
		var err error
		if s, err = r.js.Stream(ctx, contracts.StreamName); err != nil {
			return nil, err
		}
		r.eventsMu.Lock()
		r.events = s
		r.eventsMu.Unlock()
	}
	return turnreuse.RecordedRequestIn(ctx, r.js, s, conv, turnID)
}

// Run runs a stage until ctx ends, then drains: it stops fetching, lets the
// handlers in flight finish (bounded by the subscriber's DrainTimeout) and
// returns. The stream and the stage's durable consumer are created if missing.
func Run(ctx context.Context, nc *nats.Conn, st Stage, o Options) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if _, err := layout.EnsureStream(ctx, js, o.Stream); err != nil {
		return err
	}
	sc := o.Subscriber.withDefaults()
	sc.Stream, sc.Durable, sc.CreateStream = contracts.StreamOf(st.In), layout.Durable(st.Name), false
	if isLocal(st) {
		sc.MaxAckPending = min(sc.MaxAckPending, LocalMaxAckPending)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("stage", st.Name)
	// The router's and subscriber's own info lines (handler added, router
	// closed, ...) are library detail: debug. Its errors are warnings: each
	// is a handler error that will be retried, which handle has already
	// logged ("stage failed, will retry"), or the router closing on a
	// clean stop; what is lost or dead-lettered the stage logs itself.
	sc.Logger = watermill.NewSlogLoggerWithLevelMapping(log, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug, slog.LevelError: slog.LevelWarn})
	pub := NewPublisher(js)
	pub.claims = claim.NewStore(js, o.Stream.Limits().HistoryMaxAge)
	pub.maxInline = claim.Threshold(nc)
	pub.maxEvent = MaxEventBytes()
	r := &runner{st: st, o: o, sub: sc, pub: pub, js: js, log: log}
	if contracts.StreamOf(st.In) != contracts.StreamOf(st.Out) {
		r.admit = newAdmission(js, o.Stream)
	}
	if st.In == contracts.StageRequested {
		drainOldQueueInBackground(ctx, js, log)
	}
	if st.In == contracts.StageRequested {
		go keepQueue(ctx, js, &r.stats.busyNanos, log) // keeper.go
	}
	if o.Trim {
		go NewTrimmer(js, o.Stream, log).Run(ctx)
	}
	defer registerStageCounters(r)() // metrics.go

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: sc.DrainTimeout + time.Second}, sc.Logger)
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	router.AddConsumerHandler(st.Name, contracts.StageFilter(st.In), NewSubscriber(js, sc), r.handle)

	svc, err := startMicro(nc, st, sc.Durable, &r.stats, r.counts)
	if err != nil {
		return fmt.Errorf("register micro service: %w", err)
	}
	defer svc.stop()

	if o.Ready != nil {
		go func() {
			select {
			case <-router.Running():
				close(o.Ready)
			case <-ctx.Done():
			}
		}()
	}
	log.Info("stage running", "consumes", contracts.StageFilter(st.In), "durable", sc.Durable, "max_ack_pending", sc.MaxAckPending, "max_deliver", sc.MaxDeliver)
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("stage %s: %w", st.Name, err)
	}
	log.Info("stage drained", "processed", r.stats.processed.Load())
	return nil
}

func (r *runner) counts() map[string]int64 {
	m := map[string]int64{
		"processed": r.stats.processed.Load(), "rejected": r.stats.rejected.Load(),
		"retried": r.stats.retried.Load(), "dead_lettered": r.stats.dead.Load(),
	}
	if r.st.Counters != nil {
		for k, v := range r.st.Counters() {
			m[k] = v
		}
	}
	return m
}

type deliveredKey struct{}

// Delivered is JetStream's delivery count of the event a handler is
// handling (1: the first delivery; 0: unknown, not called from a stage). A
// first delivery cannot find anything an earlier delivery of the same event
// left, so a handler may skip looking for it (the LLM caller's pay-once
// lookup) when a create-if-absent write still catches what is there.
func Delivered(ctx context.Context) int {
	n, _ := ctx.Value(deliveredKey{}).(int)
	return n
}

// safeHandle turns a handler panic into an error, so it is retried and
// finally dead-lettered like any other failure, never lost.
func (r *runner) safeHandle(ctx context.Context, t *contracts.Turn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return r.st.Handle(ctx, t)
}

// decode reads a stage's input. A client publishes a bare
// AgentExecuteRequest on aptix.requested (that is all the JSON Schema asks of
// it); every later event is a Turn. The subject's ids must agree with the payload's.
func decode(stage, subject string, payload []byte) (contracts.Turn, error) {
	_, conv, turnID, ok := contracts.ParseSubject(subject)
	if !ok {
		return contracts.Turn{}, fmt.Errorf("subject %q is not aptix.<stage>.<conversationId>.<turnId>", subject)
	}
	if !contracts.IsToken(conv) || !contracts.IsToken(turnID) {
		// A wildcard or odd token would put every later event, and the
		// answer, on a subject other clients' filters match or none can.
		return contracts.Turn{}, fmt.Errorf("subject %q: conversation and turn ids must be 1-%d characters of [A-Za-z0-9_-]", subject, contracts.MaxIDLen)
	}
	var t contracts.Turn
	if stage == contracts.StageRequested {
		var req contracts.AgentExecuteRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return t, fmt.Errorf("payload is not an AgentExecuteRequest: %w", err)
		}
		if req.ConversationId == "" {
			req.ConversationId = conv
		}
		if req.TurnId == "" {
			req.TurnId = turnID
		}
		t = contracts.NewTurn(req)
	} else if err := turncodec.Unmarshal(payload, &t); err != nil {
		return t, fmt.Errorf("payload is not a Turn: %w", err)
	}
	if t.ConversationId != conv || t.TurnId != turnID {
		return t, fmt.Errorf("payload ids %s/%s differ from the subject's %s/%s", t.ConversationId, t.TurnId, conv, turnID)
	}
	return t, nil
}

// publish sends the turn on to the next stage: CloudEvents headers, the
// trace context, and Nats-Msg-Id <conversationId>.<turnId>.<stage>
// (contracts.EventMsgID) so a redelivered event that is handled twice is
// stored once. A full stream is waited out (the input stays unacknowledged
// meanwhile), never dropped.
func (r *runner) publish(ctx context.Context, stage string, t *contracts.Turn) error {
	data, err := turncodec.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode turn: %w", err)
	}
	err = untilStored(ctx, r.log, "aptix."+stage, func() error {
		return publishEventID(ctx, r.pub, "aptix/"+r.st.Name, stage, t.ConversationId, t.TurnId, contracts.EventMsgID(t, stage), data)
	})
	if err == nil && stage == contracts.StageCompleted {
		observeCompleted(ctx, t) // metrics.go
	}
	if err == nil && (stage == contracts.StageResponded || stage == contracts.StageToolRound && t.LLM != nil) {
		observeCall(ctx, t)
	}
	return err
}

func publishEventID(ctx context.Context, pub *Publisher, source, stage, conv, turnID, id string, data []byte) error {
	if !contracts.IsToken(conv) || !contracts.IsToken(turnID) {
		return &Rejection{Code: CodeInvalidEvent, Message: fmt.Sprintf("refusing to publish on a subject built from invalid ids %q/%q", conv, turnID)}
	}
	subject := contracts.Subject(stage, conv, turnID)
	id = carriedID(ctx, id)
	ctx, span := tracing.Tracer().Start(ctx, "send aptix."+stage, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessagingAttrs("send", subject, id)...),
		trace.WithAttributes(attribute.Int("messaging.message.body.size", len(data))))
	defer span.End()
	msg := message.NewMessage(id, data)
	msg.Metadata.Set(contracts.HeaderCESpecVersion, contracts.CESpecVersion)
	msg.Metadata.Set(contracts.HeaderCEID, id)
	msg.Metadata.Set(contracts.HeaderCEType, contracts.CEType(stage))
	msg.Metadata.Set(contracts.HeaderCESource, source)
	msg.Metadata.Set(contracts.HeaderCETime, time.Now().UTC().Format(time.RFC3339Nano))
	msg.Metadata.Set(contracts.HeaderCEContentType, contracts.CEContentTypeJSON)
	stampCarried(ctx, msg.Metadata)
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(msg.Metadata))
	if expectsFirst(ctx) {
		// A claimed event would be stored (under a key shared by every
		// request of the turn id) before the check: check first instead.
		if pub.wouldClaim(len(data)) {
			return errNotFirst
		}
		// Stored only if the turn holds nothing yet, at any entry point
		// (as a KV create): a turn that skipped this stage under the same
		// id is another request's (docs/architecture.md#entry-points).
		msg.Metadata.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		msg.Metadata.Set(jetstream.ExpectedLastSubjSeqSubjHeader, contracts.TurnFilter(conv, turnID))
	}
	msg.SetContext(ctx)
	if err := pub.Publish(subject, msg); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	return nil
}

// fail ends a turn with a kind "error" completion the client can read.
func (r *runner) fail(ctx context.Context, t *contracts.Turn, code, message string) error {
	t.Failure = &contracts.Failure{Stage: r.st.Name, Code: code, Message: message}
	var sources []contracts.SourceRef
	if t.Envelope != nil {
		sources = t.Envelope.Sources
	}
	var raw string
	if r := t.Response; r != nil {
		// The mapper had mapped the turn: its result holds the sources and
		// the upstream body its event no longer carries twice.
		raw = r.RawResponseJson
		if len(sources) == 0 {
			sources = r.Sources
		}
	}
	resp := contracts.FailedResponse(t.Request, *t.Failure, sources, t.Warnings)
	resp.RawResponseJson = raw
	t.Response = &resp
	err := r.publish(ctx, contracts.StageCompleted, t)
	if err == nil || backpressure.IsAtCapacity(err) {
		return err
	}
	// The whole turn could not be published: the client still gets a
	// small error completion with the ids, the failure and the response.
	small := contracts.Turn{Version: t.Version, ConversationId: t.ConversationId, TurnId: t.TurnId,
		Request:  contracts.AgentExecuteRequest{ConversationId: t.ConversationId, TurnId: t.TurnId, Mode: t.Request.Mode},
		Response: t.Response, Failure: t.Failure, Warnings: t.Warnings}
	if serr := r.publish(ctx, contracts.StageCompleted, &small); serr != nil {
		return fmt.Errorf("error completion: %w (and its small form: %w)", err, serr)
	}
	return nil
}

// reusedOr answers a reused turn id (again), or returns the lookup's error.
func (r *runner) reusedOr(ctx context.Context, t *contracts.Turn, again bool, err error) error {
	if err != nil {
		return err
	}
	return r.failReused(ctx, t)
}

// failReused answers a turn id sent again with a different request: an
// error completion under its own Nats-Msg-Id, so it is stored after the first
// request's answer instead of being de-duplicated away.
func (r *runner) failReused(ctx context.Context, t *contracts.Turn) error {
	t.Failure = &contracts.Failure{Stage: r.st.Name, Code: contracts.CodeTurnIDReused, Message: fmt.Sprintf(
		"turn id %q was already used in conversation %q by a different request; its answer stands: send this request with a new turn id", t.TurnId, t.ConversationId)}
	resp := contracts.FailedResponse(t.Request, *t.Failure, nil, t.Warnings)
	t.Response = &resp
	data, err := turncodec.Marshal(t)
	if err != nil {
		return err
	}
	return untilStored(ctx, r.log, "aptix."+contracts.StageCompleted, func() error {
		return publishEventID(ctx, r.pub, "aptix/"+r.st.Name, contracts.StageCompleted, t.ConversationId, t.TurnId, reuseMsgID(t.ConversationId, t.TurnId, t.Request), data)
	})
}

// deadLetter keeps an event the stage gave up on, with the reason in headers.
func (r *runner) deadLetter(ctx context.Context, msg *message.Message, delivered int, reason string) error {
	r.stats.dead.Add(1)
	r.stats.fail(reason)
	subject := msg.Metadata.Get(MetaSubject)
	_, conv, turnID, ok := contracts.ParseSubject(subject)
	id := nuid.Next()
	if ok {
		id = carriedID(ctx, contracts.TurnKey(conv, turnID)+".dead."+r.st.Name)
	}
	dead := message.NewMessage(id, msg.Payload)
	for k, v := range msg.Metadata {
		// The event's own headers (trace, CloudEvents, claim, replay marks),
		// never the publish directives of the consumed event: the dead
		// letter is a new publish and must always be stored.
		if !PublishDirective(k) {
			dead.Metadata.Set(k, v)
		}
	}
	dead.Metadata.Set(contracts.HeaderDeadReason, reason)
	dead.Metadata.Set(contracts.HeaderDeadStage, r.st.Name)
	dead.Metadata.Set(contracts.HeaderDeadSubject, subject)
	dead.Metadata.Set(contracts.HeaderDeadDeliveries, strconv.Itoa(delivered))
	dead.SetContext(ctx)
	if err := untilStored(ctx, r.log, contracts.DeadSubject(r.st.Name), func() error {
		return r.pub.Publish(contracts.DeadSubject(r.st.Name), dead)
	}); err != nil {
		r.log.Error("dead letter not stored", "subject", subject, "reason", reason, "err", err)
		return fmt.Errorf("dead letter %s: %w", subject, err)
	}
	return nil
}
