package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// A turn pays only for the stages it needs (docs/architecture.md#entry-points).
// The topology declares which leading stages a turn may skip
// (layout.StageSpec.Skippable) and so where it may enter (layout.Entries);
// EntryOf picks the entry point of one request, and the Entrance publishes
// it there. A turn with no retrieval enters at aptix.retrieved, with the
// retrieval section the retriever would have written and the event marked
// contracts.HeaderSkipped: no queue write, no retriever hop.
//
// What the queue and the retriever did for such a turn, the Entrance does
// itself or hands back to them:
//   - validation: an invalid request is submitted on aptix.requested, where
//     the retriever answers it invalid_request as before;
//   - admission: a turn enters APTIX past the queue only while APTIX is below
//     the mark the retriever admits at (layout.StreamConfig.AdmitBelow, the
//     same admission); otherwise it is queued like any other request, so the
//     queue's cap (429), the admission hold and the at_capacity answer
//     apply to it unchanged;
//   - de-duplication: the retrieved event carries the retriever's own
//     Nats-Msg-Id and must be the first on its subject, so a turn sent again
//     is stored once and a turn id reused with another request is refused
//     (client.ErrTurnIDReused), as Submit refuses it;
//   - the claim check: an event too large to publish inline goes through the
//     queue, whose first stage claims it.

// EntryOf is the event stage a client's request enters the pipeline at: past
// every leading stage the topology lets a turn skip (layout.Entries) whose
// work the request does not need (needs), and at the first stage's In when
// the request is invalid, so that stage answers it invalid_request.
func EntryOf(req contracts.AgentExecuteRequest) string {
	entry := layout.Stages[0].In
	if req.Validate() != nil {
		return entry
	}
	for _, st := range layout.Stages {
		if st.In != entry || !st.Skippable || needs(st.Name, req) {
			break
		}
		entry = st.Out
	}
	return entry
}

// needs says whether a request needs a skippable stage's work; a stage
// without a rule here is never skipped.
func needs(stage string, req contracts.AgentExecuteRequest) bool {
	switch stage {
	case "retriever":
		return req.RagScope != contracts.RagScopeNone
	}
	return true
}

// FillSkipped writes the section a skipped stage writes for a turn that
// needs none of its work, so the stages after it read the turn as if it had
// run (the retriever, services/retriever/stage, checks it writes the same).
func FillSkipped(stage string, t *contracts.Turn) {
	switch stage {
	case "retriever":
		t.Retrieval = &contracts.Retrieval{Scope: contracts.RagScopeNone, Chunks: []contracts.RagChunk{}}
	}
}

// Entrance submits turns at their entry point (EntryOf). One per process:
// its admission reads APTIX's size at most every 100 ms for all its turns.
type Entrance struct {
	js        jetstream.JetStream
	admit     *admission
	maxInline int
	maxEvent  int
	source    string
	// entered counts turns by the entry point they took; queued the ones
	// that could skip but were queued (no room past the queue, too large).
	entered map[string]*atomic.Int64
	queued  atomic.Int64
}

// NewEntrance returns the entrance of a client on nc: source names it in
// the events it writes (ce-source "aptix/<source>"); c is the deployment's
// stream limits, the ones its first stage admits by.
func NewEntrance(nc *nats.Conn, c layout.StreamConfig, source string) (*Entrance, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	e := &Entrance{js: js, admit: newAdmission(js, c), maxInline: claim.Threshold(nc), maxEvent: MaxEventBytes(),
		source: "aptix/" + source, entered: map[string]*atomic.Int64{}}
	for _, entry := range layout.Entries() {
		e.entered[entry] = &atomic.Int64{}
	}
	return e, nil
}

// Entered is how many submissions this entrance stored at each entry point
// (a turn sent again counts again), and how many of those at the first
// could have skipped a stage but were queued (APTIX above its admission mark, or an event too large to inline).
func (e *Entrance) Entered() (byEntry map[string]int64, queued int64) {
	byEntry = map[string]int64{}
	for k, v := range e.entered {
		byEntry[k] = v.Load()
	}
	return byEntry, e.queued.Load()
}

// Submit brings the request in at its entry point and returns the event
// stage it entered at, once JetStream stored it. Its errors are Submit's: a
// full queue or stream wraps backpressure.ErrAtCapacity, a turn id used by
// another request client.ErrTurnIDReused.
func (e *Entrance) Submit(ctx context.Context, req contracts.AgentExecuteRequest) (string, error) {
	first := layout.Stages[0].In
	entry := EntryOf(req)
	if entry == first {
		return e.queue(ctx, req)
	}
	skipped, _ := layout.SkippedAt(entry)
	t := contracts.NewTurn(req)
	for _, st := range skipped {
		FillSkipped(st, &t)
	}
	data, err := turncodec.Marshal(&t)
	if err != nil {
		return "", fmt.Errorf("encode turn: %w", err)
	}
	if len(data) > min(e.maxInline, e.maxEvent) || !e.admit.now(ctx) {
		e.queued.Add(1)
		return e.queue(ctx, req)
	}
	if err := e.publish(ctx, entry, strings.Join(skipped, ","), &t, data); err != nil {
		return "", err
	}
	e.entered[entry].Add(1)
	return entry, nil
}

// queue submits the request on aptix.requested, the way every client does.
func (e *Entrance) queue(ctx context.Context, req contracts.AgentExecuteRequest) (string, error) {
	if err := client.Submit(ctx, e.js, req); err != nil {
		return "", err
	}
	e.entered[contracts.StageRequested].Add(1)
	return contracts.StageRequested, nil
}

// publish stores the turn's entry event: the stage's own CloudEvents headers
// and Nats-Msg-Id (those of the skipped stage's output), the trace context,
// the skipped stages, and the expectation that the subject holds nothing yet.
func (e *Entrance) publish(ctx context.Context, entry, skipped string, t *contracts.Turn, data []byte) error {
	subject := contracts.Subject(entry, t.ConversationId, t.TurnId)
	id := contracts.EventMsgID(t, entry)
	ctx, span := tracing.Tracer().Start(ctx, "send aptix."+entry, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessagingAttrs("send", subject, id)...),
		trace.WithAttributes(attribute.String("aptix.conversation_id", t.ConversationId), attribute.String("aptix.turn_id", t.TurnId),
			attribute.String("aptix.skipped", skipped)))
	defer span.End()
	h := nats.Header{}
	h.Set(contracts.HeaderMsgID, id)
	h[contracts.HeaderCESpecVersion] = []string{contracts.CESpecVersion}
	h[contracts.HeaderCEID] = []string{id}
	h[contracts.HeaderCEType] = []string{contracts.CEType(entry)}
	h[contracts.HeaderCESource] = []string{e.source}
	h[contracts.HeaderCETime] = []string{time.Now().UTC().Format(time.RFC3339Nano)}
	h[contracts.HeaderCEContentType] = []string{contracts.CEContentTypeJSON}
	h[contracts.HeaderSkipped] = []string{skipped}
	h[jetstream.ExpectedLastSubjSeqHeader] = []string{"0"}
	otel.GetTextMapPropagator().Inject(ctx, tracing.HeaderCarrier(h))
	ack, err := e.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: h})
	err = notFirst(ack, err)
	if errors.Is(err, errNotFirst) {
		// Sent before: the same request again (a retry) is in already; a
		// different one under this turn id is refused, as Submit refuses it.
		prev, rerr := turnreuse.RecordedRequest(ctx, e.js, t.ConversationId, t.TurnId)
		if rerr != nil {
			return fmt.Errorf("publish %s: %w (and reading the turn's first request: %w)", subject, err, rerr)
		}
		if prev != nil && !turnreuse.SameRequest(*prev, t.Request) {
			return fmt.Errorf("%w: turn %s of conversation %s was already sent with a different request, whose answer stands: use a new turn id", client.ErrTurnIDReused, t.TurnId, t.ConversationId)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, backpressure.Wrap(err))
	}
	return nil
}
