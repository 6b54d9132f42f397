package application

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Background time limits (APTIX_BACKGROUND_TIMEOUT): each background
// response puts one message in the work-queue stream APTIX_DEADLINES. The
// gateways' shared durable consumer holds it until the deadline with
// NakWithDelay (no timer in any process, no polling: the server redelivers
// it when it is due), then, if the response is still running, records a
// cancel with reason timeout. The LLM caller aborts the call, the turn ends
// with a timeout rejection, the response reads failed (code timeout), and
// its webhook fires from the completion like any other.
const (
	DeadlineStream   = "APTIX_DEADLINES"
	DeadlineConsumer = "aptix-gateway-deadlines"
	deadlinePrefix   = "aptix.deadline"
)

// DefaultBackgroundTimeout is APTIX_BACKGROUND_TIMEOUT's default.
const DefaultBackgroundTimeout = 600 * time.Second

type deadline struct {
	ResponseID string    `json:"responseId"`
	At         time.Time `json:"at"`
}

// startDeadlines creates the stream and the consumer and starts it.
func (a *App) startDeadlines(ctx context.Context) (jetstream.ConsumeContext, error) {
	if _, err := a.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: DeadlineStream, Description: "Aptix gateway: background responses' time limits",
		Subjects: []string{deadlinePrefix + ".>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy, Replicas: max(a.cfg.Replicas, 1),
	}); err != nil {
		return nil, fmt.Errorf("stream %s: %w", DeadlineStream, err)
	}
	cons, err := a.js.CreateOrUpdateConsumer(ctx, DeadlineStream, jetstream.ConsumerConfig{
		Durable: DeadlineConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("deadline consumer: %w", err)
	}
	cc, err := cons.Consume(a.onDeadline)
	if err != nil {
		return nil, fmt.Errorf("deadline consumer: %w", err)
	}
	return cc, nil
}

// armDeadline records meta's time limit.
func (a *App) armDeadline(ctx context.Context, meta *responses.Meta) error {
	b, err := json.Marshal(deadline{ResponseID: meta.ID, At: a.cfg.Now().Add(a.cfg.BackgroundTimeout)})
	if err != nil {
		return fmt.Errorf("encode deadline: %w", err)
	}
	subject := deadlinePrefix + "." + meta.ConversationID + "." + meta.TurnID
	h := nats.Header{}
	h.Set(contracts.HeaderMsgID, contracts.TurnKey(meta.ConversationID, meta.TurnID)+".deadline")
	if _, err := a.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: b, Header: h}); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

func (a *App) onDeadline(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d deadline
	if json.Unmarshal(m.Data(), &d) != nil {
		_ = m.Term()
		return
	}
	conv, turn, _ := strings.Cut(strings.TrimPrefix(m.Subject(), deadlinePrefix+"."), ".")
	meta, err := a.lookupIn(ctx, d.ResponseID, conv, turn)
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if meta == nil {
		// The deadline is armed before its turn is submitted, and a
		// response that starts its conversation has no record but its
		// turn's events: on the first delivery they may not be stored
		// yet. Look again when the limit is due; nothing then means the
		// response is gone (deleted, never submitted, past retention).
		if wait := d.At.Sub(a.cfg.Now()); wait > 0 {
			_ = m.NakWithDelay(wait)
			return
		}
		_ = m.Ack()
		return
	}
	r, err := a.current(ctx, meta)
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	if responses.Terminal(r.Status) {
		_ = m.Ack()
		return
	}
	if wait := d.At.Sub(a.cfg.Now()); wait > 0 {
		_ = m.NakWithDelay(wait)
		return
	}
	if _, err := a.cancels.CancelFor(ctx, meta.ConversationID, meta.TurnID, responses.CodeTimeout); err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	a.log.Info("background response timed out", "response", meta.ID, "limit", a.cfg.BackgroundTimeout)
	_ = m.Ack()
}
