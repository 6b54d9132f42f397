package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Replays and dead-letter retries re-drive a stored event into
// its stage. Two things must then hold for every later stage of that turn,
// so the marks travel as headers the runner copies from a stage's input to
// its outputs (a Turn field could not ride on a bare request):
//
//   - a replay must not overwrite the original conversation's continuation
//     record (the mapper asks UpdatesConversation);
//   - a retried turn must not be de-duplicated: its first run may already
//     have stored an error completion under <conv>.<turn>.completed, so every event
//     of the retry gets a Nats-Msg-Id suffixed with the redrive mark.

// carriedHeaders are the marks the runner copies.
var carriedHeaders = []string{contracts.HeaderReplayOf, contracts.HeaderReplayContinue, contracts.HeaderRedrive}

type carriedKey struct{}

// withCarried remembers the input event's replay and redrive marks for the
// events the stage publishes while handling it.
func withCarried(ctx context.Context, md message.Metadata) context.Context {
	var c map[string]string
	for _, k := range carriedHeaders {
		if v := md.Get(k); v != "" {
			if c == nil {
				c = map[string]string{}
			}
			c[k] = v
		}
	}
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, carriedKey{}, c)
}

func carried(ctx context.Context) map[string]string {
	c, _ := ctx.Value(carriedKey{}).(map[string]string)
	return c
}

// ReplayOf returns the original turn id when the event being handled is a
// replay, else "".
func ReplayOf(ctx context.Context) string { return carried(ctx)[contracts.HeaderReplayOf] }

// UpdatesConversation reports whether the turn being handled may write its
// conversation's continuation record: always, except for a replay that was
// not asked to continue the conversation.
func UpdatesConversation(ctx context.Context) bool {
	c := carried(ctx)
	return contracts.ReplayUpdatesConversation(c[contracts.HeaderReplayOf], c[contracts.HeaderReplayContinue])
}

// carriedID is the Nats-Msg-Id of an event published while handling ctx's
// input: id itself, or id with the redrive mark so a retried turn's events
// are stored again rather than de-duplicated against its first run.
func carriedID(ctx context.Context, id string) string {
	if r := carried(ctx)[contracts.HeaderRedrive]; r != "" {
		return id + ".redrive-" + r
	}
	return id
}

// stampCarried copies ctx's marks onto an outgoing event.
func stampCarried(ctx context.Context, md message.Metadata) {
	for k, v := range carried(ctx) {
		md.Set(k, v)
	}
}

// ReplayEvent is one event to re-drive into the stage that consumes Stage.
type ReplayEvent struct {
	Stage          string // the event's stage: requested, retrieved, enveloped, responded
	ConversationId string
	TurnId         string // the new turn id
	Data           []byte // the payload: a request for requested, else a Turn
	// Of is the original turn; OrigHeader its event's headers (the
	// traceparent becomes a span link).
	Of         string
	OrigHeader nats.Header
	// Continue lets the replay update the conversation's continuation record.
	Continue bool
}

// PublishReplay stores a replayed event on its stage's subject with
// Nats-Msg-Id <conversation>.<turn>.<stage>, the replay headers and a new trace linked to
// the original's, claim-checking a payload too big for one message. It
// returns once JetStream accepted the event.
func PublishReplay(ctx context.Context, js jetstream.JetStream, ev ReplayEvent) error {
	if !contracts.IsToken(ev.ConversationId) || !contracts.IsToken(ev.TurnId) {
		return fmt.Errorf("conversation id %q and turn id %q must each be 1-%d characters of [A-Za-z0-9_-]", ev.ConversationId, ev.TurnId, contracts.MaxIDLen)
	}
	subject := contracts.Subject(ev.Stage, ev.ConversationId, ev.TurnId)
	id := contracts.MsgID(ev.ConversationId, ev.TurnId, ev.Stage)
	orig := otel.GetTextMapPropagator().Extract(context.Background(), tracing.HeaderCarrier(ev.OrigHeader))
	// A new root: the replay is its own trace, linked to the one it re-runs.
	ctx, span := tracing.Tracer().Start(ctx, "send aptix."+ev.Stage, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithLinks(trace.LinkFromContext(orig, attribute.String("aptix.replay_of", ev.Of))),
		trace.WithAttributes(tracing.MessagingAttrs("send", subject, id)...),
		trace.WithAttributes(attribute.String("aptix.conversation_id", ev.ConversationId), attribute.String("aptix.turn_id", ev.TurnId), attribute.String("aptix.replay_of", ev.Of)))
	defer span.End()
	msg := message.NewMessage(id, ev.Data)
	msg.Metadata.Set(contracts.HeaderCESpecVersion, contracts.CESpecVersion)
	msg.Metadata.Set(contracts.HeaderCEID, id)
	msg.Metadata.Set(contracts.HeaderCEType, contracts.CEType(ev.Stage))
	msg.Metadata.Set(contracts.HeaderCESource, "aptix/replay")
	msg.Metadata.Set(contracts.HeaderCETime, time.Now().UTC().Format(time.RFC3339Nano))
	msg.Metadata.Set(contracts.HeaderCEContentType, contracts.CEContentTypeJSON)
	msg.Metadata.Set(contracts.HeaderReplayOf, ev.Of)
	if ev.Continue {
		msg.Metadata.Set(contracts.HeaderReplayContinue, "true")
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(msg.Metadata))
	msg.SetContext(ctx)
	pub := NewPublisher(js)
	pub.claims = claim.NewStore(js, layout.StreamConfig{}.Limits().HistoryMaxAge)
	pub.maxInline = claim.Threshold(js.Conn())
	if err := pub.Publish(subject, msg); err != nil {
		return backpressure.Wrap(err)
	}
	return nil
}
