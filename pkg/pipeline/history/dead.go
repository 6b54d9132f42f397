package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Dead letters are events a stage gave up on (pkg/pipeline's runner):
// stored on aptix.dead.<stage> in APTIX with the original payload and
// headers plus the reason, numbered by their stream sequence.

// DeadLetter is a stored dead letter with its headers decoded. Event.Stage
// and Event.Turn are those of the original event.
type DeadLetter struct {
	Event
	Reason, FromStage, Original string
	Deliveries                  int
}

// DeadWebhook is the source of the gateway's dead letters: webhook
// deliveries that exhausted their attempts, filed as aptix.dead.webhook
// beside the stages' and listed, retried and purged as theirs are. A
// retry publishes the completion again; the gateway delivers a re-driven
// completion's webhook afresh.
const DeadWebhook = "webhook"

// DeadSources names what dead letters are filed under: the stages and
// the gateway's webhooks.
func DeadSources() string { return layout.StageNames() + ", " + DeadWebhook }

// Conversation is the conversation of the original event ("" when unknown).
func (d DeadLetter) Conversation() string {
	_, conv, _, _ := contracts.ParseSubject(d.Original)
	return conv
}

// DeadFilter is the subject filter of one stage's dead letters, or all of them.
func DeadFilter(stage string) (string, error) {
	if stage == "" {
		return contracts.DeadPrefix + ".>", nil
	}
	if stage == DeadWebhook {
		return contracts.DeadSubject(stage), nil
	}
	for _, st := range layout.Stages {
		if st.Name == stage {
			return contracts.DeadSubject(stage), nil
		}
	}
	return "", inputf("stage %q: want one of %s", stage, DeadSources())
}

// DeadLetters reads the dead letters of one stage (or all), oldest first.
func DeadLetters(ctx context.Context, js jetstream.JetStream, stage string) ([]DeadLetter, error) {
	filter, err := DeadFilter(stage)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filter, err)
	}
	var out []DeadLetter
	for read := uint64(0); read < total; read++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				break // purged or trimmed while reading
			}
			return nil, fmt.Errorf("read %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		out = append(out, toDead(md.Sequence.Stream, md.Timestamp, m.Subject(), m.Headers(), m.Data()))
		if md.NumPending == 0 {
			break
		}
	}
	return out, nil
}

// GetDeadLetter reads one dead letter by stream sequence; ErrNotStored when
// there is none (retried, purged or trimmed).
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (DeadLetter, error) {
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	m, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, fmt.Errorf("no event at sequence %d (retried, purged or trimmed?): %w", seq, ErrNotStored)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("read sequence %d: %w", seq, err)
	}
	if !strings.HasPrefix(m.Subject, contracts.DeadPrefix+".") {
		return DeadLetter{}, fmt.Errorf("sequence %d is %s, not a dead letter: %w", seq, m.Subject, ErrNotStored)
	}
	return toDead(m.Sequence, m.Time, m.Subject, m.Header, m.Data), nil
}

func toDead(seq uint64, at time.Time, subject string, h nats.Header, data []byte) DeadLetter {
	d := DeadLetter{Event: Event{Seq: seq, Time: at, Subject: subject, Header: h, Data: data},
		Reason: h.Get(contracts.HeaderDeadReason), FromStage: h.Get(contracts.HeaderDeadStage), Original: h.Get(contracts.HeaderDeadSubject)}
	d.Deliveries, _ = strconv.Atoi(h.Get(contracts.HeaderDeadDeliveries))
	if stage, _, turn, ok := contracts.ParseSubject(d.Original); ok {
		d.Stage, d.Turn = stage, turn
	}
	return d
}

// RetryMsg is the original event of a dead letter, ready to publish again:
// its payload and headers (the claim header included, so a claim-checked
// event is read from the same object), without the dead-letter headers, and
// with a fresh Nats-Msg-Id and the redrive mark, so neither this event nor
// the events the retried turn produces are de-duplicated against the first run.
func RetryMsg(d DeadLetter) (*nats.Msg, error) {
	stage, conv, turn, ok := contracts.ParseSubject(d.Original)
	if !ok || !contracts.IsToken(conv) || !contracts.IsToken(turn) {
		return nil, fmt.Errorf("dead letter %d came from %q, which is no turn's subject: it cannot be retried (purge it)", d.Seq, d.Original)
	}
	h := nats.Header{}
	for k, v := range d.Header {
		switch k {
		case contracts.HeaderDeadReason, contracts.HeaderDeadStage, contracts.HeaderDeadSubject, contracts.HeaderDeadDeliveries:
			continue
		}
		if pipeline.PublishDirective(k) {
			// Nats-Msg-Id is set below; an expectation the consumed event
			// carried (dead letters stored before the stages dropped them
			// kept it) would refuse the retry.
			continue
		}
		h[k] = v
	}
	mark := strconv.FormatUint(d.Seq, 10)
	h.Set(contracts.HeaderRedrive, mark)
	h.Set(contracts.HeaderMsgID, contracts.MsgID(conv, turn, stage)+".redrive-"+mark)
	return &nats.Msg{Subject: d.Original, Header: h, Data: d.Data}, nil
}

// Retry re-publishes a dead letter's original event and deletes the dead
// letter once JetStream has accepted the retry: a refused publish leaves it
// in place to retry later. retried is true when the event was re-published
// (err then says only that the dead letter could not be deleted).
func Retry(ctx context.Context, js jetstream.JetStream, d DeadLetter) (retried bool, err error) {
	m, err := RetryMsg(d)
	if err != nil {
		return false, err
	}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return false, fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err == nil {
		err = stream.DeleteMsg(ctx, d.Seq)
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return true, fmt.Errorf("retried, but the dead letter was not deleted: %w", err)
	}
	return true, nil
}

// PurgeDead deletes the dead letters of one stage, or all, and returns how many.
func PurgeDead(ctx context.Context, js jetstream.JetStream, stage string) (uint64, error) {
	filter, err := DeadFilter(stage)
	if err != nil {
		return 0, err
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
		return 0, fmt.Errorf("purge %s: %w", filter, err)
	}
	return n, nil
}

// DeadCounts is the number of stored dead letters per stage (one stream
// info with a subject filter: no message is read).
func DeadCounts(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.DeadPrefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	out := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, contracts.DeadPrefix+".")] += n
	}
	return out, nil
}
