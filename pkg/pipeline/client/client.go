// Package client is how a program hands turns to the pipeline and reads
// their answers: Submit a request, then Await its completion, or follow
// every completion with one consumer (WatchCompletions).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
)

// Submit publishes an execute event on aptix.requested.<conv>.<turn>, with
// the trace context and Nats-Msg-Id, and returns once JetStream stored it in
// the queue. A full queue is an error wrapping ErrAtCapacity: nothing was
// accepted, and the caller should retry later.
func Submit(ctx context.Context, js jetstream.JetStream, req contracts.AgentExecuteRequest) error {
	if !contracts.IsToken(req.ConversationId) || !contracts.IsToken(req.TurnId) {
		return fmt.Errorf("conversation id %q and turn id %q must each be 1-%d characters of [A-Za-z0-9_-]", req.ConversationId, req.TurnId, contracts.MaxIDLen)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	subject := contracts.Subject(contracts.StageRequested, req.ConversationId, req.TurnId)
	id := contracts.MsgID(req.ConversationId, req.TurnId, contracts.StageRequested)
	ctx, span := tracing.Tracer().Start(ctx, "send aptix."+contracts.StageRequested, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessagingAttrs("send", subject, id)...),
		trace.WithAttributes(attribute.String("aptix.conversation_id", req.ConversationId), attribute.String("aptix.turn_id", req.TurnId)))
	defer span.End()
	h := nats.Header{}
	h.Set(contracts.HeaderMsgID, id)
	h[contracts.HeaderCESpecVersion] = []string{contracts.CESpecVersion}
	h[contracts.HeaderCEID] = []string{id}
	h[contracts.HeaderCEType] = []string{contracts.CEType(contracts.StageRequested)}
	h[contracts.HeaderCESource] = []string{"aptix/client"}
	h[contracts.HeaderCETime] = []string{time.Now().UTC().Format(time.RFC3339Nano)}
	h[contracts.HeaderCEContentType] = []string{contracts.CEContentTypeJSON}
	otel.GetTextMapPropagator().Inject(ctx, tracing.HeaderCarrier(h))
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: h})
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, backpressure.Wrap(err))
	}
	if ack.Duplicate {
		// Stored before under this turn id: fine if it is the same request
		// (a retry), an error if not (the new one was dropped).
		if prev, err := firstRequest(ctx, js, req.ConversationId, req.TurnId); err == nil && prev != nil && !turnreuse.SameRequest(*prev, req) {
			return fmt.Errorf("%w: turn %s of conversation %s was already sent with a different request, whose answer stands: use a new turn id", ErrTurnIDReused, req.TurnId, req.ConversationId)
		}
	}
	return nil
}

// ErrTurnIDReused is returned by Submit for a turn id already used by a
// different request.
var ErrTurnIDReused = errors.New(contracts.CodeTurnIDReused)

// firstRequest is the request a turn id was accepted with: still queued, or
// recorded by its retrieved event.
func firstRequest(ctx context.Context, js jetstream.JetStream, conv, turnID string) (*contracts.AgentExecuteRequest, error) {
	if q, err := js.Stream(ctx, contracts.QueueStreamName); err == nil {
		if m, err := q.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageRequested, conv, turnID)); err == nil {
			var r contracts.AgentExecuteRequest
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return nil, err
			}
			return &r, nil
		}
	}
	return turnreuse.RecordedRequest(ctx, js, conv, turnID)
}

// Await returns the turn's completed event. It reads the completed subject
// from the stream with an ordered consumer from the last stored message on,
// so a result published before Await started is found, never missed.
func Await(ctx context.Context, js jetstream.JetStream, conversationID, turnID string) (contracts.Turn, error) {
	var t contracts.Turn
	if err := contracts.ValidateIDs(conversationID, turnID); err != nil {
		return t, fmt.Errorf("await: %w", err)
	}
	// The last completion of the turn: normally its only one; after a turn
	// id was reused with another request, the turn_id_reused error.
	cons, err := js.OrderedConsumer(ctx, contracts.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.Subject(contracts.StageCompleted, conversationID, turnID)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		// Without a bound, a consumer whose server went away re-creates
		// itself for ever inside Next.
		MaxResetAttempts: 10,
	})
	if err != nil {
		return t, fmt.Errorf("watch completion: %w", err)
	}
	type fetched struct {
		m   jetstream.Msg
		err error
	}
	for {
		wait := 5 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			return t, fmt.Errorf("turn %s/%s: %w", conversationID, turnID, context.DeadlineExceeded)
		}
		// Next may block past its wait while the connection is down: the
		// caller's deadline holds whatever the server does.
		got := make(chan fetched, 1)
		go func() {
			m, err := cons.Next(jetstream.FetchMaxWait(max(wait, time.Second)))
			got <- fetched{m, err}
		}()
		var f fetched
		select {
		case f = <-got:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			return t, fmt.Errorf("turn %s/%s: %w", conversationID, turnID, ctx.Err())
		}
		m, err := f.m, f.err
		if err != nil {
			if errors.Is(err, jetstream.ErrOrderedConsumerReset) || errors.Is(err, nats.ErrConnectionClosed) {
				return t, fmt.Errorf("turn %s/%s: %w", conversationID, turnID, err)
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
				// The connection is down or the consumer resetting: not a
				// tight loop meanwhile.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
			}
			continue // nothing yet
		}
		data, err := claim.EventData(ctx, js, m.Headers(), m.Data())
		if err != nil {
			return t, err
		}
		if err := turncodec.Unmarshal(data, &t); err != nil {
			return t, fmt.Errorf("decode completion: %w", err)
		}
		return t, nil
	}
}
