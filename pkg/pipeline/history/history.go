// Package history reads what the APTIX stream keeps of every turn, and
// re-drives it: a conversation's events in order, one turn's event per
// stage, a structural comparison of two turns, a replay built from a stored
// event, and the dead letters (list, retry, purge). The CLI (`aptix events`,
// `trace`, `diff`, `replay`, `dead`) and the gateway's web console both call
// it, so the two always show the same thing (docs/debugging.md).
//
// Every read is bounded by subject: a turn is a last-message-per-subject
// lookup, a conversation a filtered read of its own subjects; nothing here
// scans the whole stream.
package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
)

// InputError is a mistake in what the caller asked for (an unknown stage,
// an ambiguous turn id): retrying does not help. The CLI exits 2 on it; the
// console answers 400.
type InputError struct{ Err error }

func (e InputError) Error() string      { return e.Err.Error() }
func (e InputError) Unwrap() error      { return e.Err }
func (e InputError) IsInputError() bool { return true }

func inputf(format string, args ...any) error { return InputError{fmt.Errorf(format, args...)} }

// ErrNotStored: the stream holds no such event (never reached that stage,
// or trimmed from history).
var ErrNotStored = errors.New("not stored")

// Event is one stored message of the stream.
type Event struct {
	Seq     uint64
	Time    time.Time
	Subject string
	// Stage is the event's stage ("dead.<stage>" for a dead letter of the
	// conversation); Turn its turn id.
	Stage  string
	Turn   string
	Header map[string][]string
	// Data is the payload, a claim-checked one resolved.
	Data []byte
}

// TraceID takes the trace id out of a W3C traceparent header
// (version-trace-span-flags); "-" when there is none.
func TraceID(h map[string][]string) string {
	v := h[contracts.HeaderTraceparent]
	if len(v) == 0 {
		return "-"
	}
	parts := strings.Split(v[0], "-")
	if len(parts) != 4 {
		return "-"
	}
	return parts[1]
}

// ConversationEvents reads the conversation's events and the dead letters
// whose original subject belongs to it, in stream order.
func ConversationEvents(ctx context.Context, js jetstream.JetStream, conversation string) ([]Event, error) {
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	var events []Event
	for _, filter := range []string{contracts.ConversationFilter(conversation), contracts.DeadPrefix + ".>"} {
		total, err := stored(ctx, stream, filter, nil)
		if err != nil {
			return nil, err
		}
		err = read(ctx, js, stream, []string{filter}, total, func(m jetstream.Msg, e Event) {
			if e.Data == nil {
				e.Data = m.Data() // the stub still says what it was
			}
			if stage, conv, turn, ok := contracts.ParseSubject(m.Subject()); ok && conv == conversation {
				e.Stage, e.Turn = stage, turn
			} else if orig := m.Headers().Get(contracts.HeaderDeadSubject); orig != "" {
				_, conv, turn, ok := contracts.ParseSubject(orig)
				if !ok || conv != conversation {
					return
				}
				e.Stage, e.Turn = "dead."+m.Headers().Get(contracts.HeaderDeadStage), turn
			} else {
				return
			}
			events = append(events, e)
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].Seq < events[j].Seq })
	return events, nil
}

// StageEvents reads the conversation's events of the given stages, in
// stream order: one ordered consumer filtered on exactly those subjects
// (aptix.<stage>.<conversation>.>), so nothing else is read. A claim-checked
// event that cannot be resolved any more is left out.
func StageEvents(ctx context.Context, js jetstream.JetStream, conversation string, stages ...string) ([]Event, error) {
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	want := map[string]bool{}
	filters := make([]string, 0, len(stages))
	for _, st := range stages {
		if !want[st] {
			want[st] = true
			filters = append(filters, contracts.SubjectPrefix+"."+st+"."+conversation+".>")
		}
	}
	total, err := stored(ctx, stream, contracts.ConversationFilter(conversation), want)
	if err != nil {
		return nil, err
	}
	var events []Event
	err = read(ctx, js, stream, filters, total, func(m jetstream.Msg, e Event) {
		stage, conv, turn, ok := contracts.ParseSubject(m.Subject())
		if !ok || conv != conversation || !want[stage] || e.Data == nil {
			return
		}
		e.Stage, e.Turn = stage, turn
		events = append(events, e)
	})
	if err != nil {
		return nil, err
	}
	return events, nil
}

// stored counts the messages the stream holds under filter, only those of
// the stages in stages when it is not nil.
func stored(ctx context.Context, stream jetstream.Stream, filter string, stages map[string]bool) (uint64, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	var total uint64
	for subj, n := range info.State.Subjects {
		if stages != nil {
			if stage, _, _, ok := contracts.ParseSubject(subj); !ok || !stages[stage] {
				continue
			}
		}
		total += n
	}
	return total, nil
}

// read hands each of the (at most total) messages under filters to each, in
// stream order, with its payload resolved (Data nil when a claim could not
// be: the stub is then in the message).
func read(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filters []string, total uint64, each func(jetstream.Msg, Event)) error {
	if total == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters})
	if err != nil {
		return fmt.Errorf("read %s: %w", strings.Join(filters, ", "), err)
	}
	for read := uint64(0); read < total; {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				return nil // the stream was trimmed while reading
			}
			return fmt.Errorf("read %s: %w", strings.Join(filters, ", "), err)
		}
		read++
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		data, err := claim.EventData(ctx, js, m.Headers(), m.Data())
		if err != nil {
			data = nil
		}
		each(m, Event{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(), Header: m.Headers(), Data: data})
		if md.NumPending == 0 {
			return nil
		}
	}
	return nil
}

// TurnEvent reads the last event of a turn at a stage, resolving a
// claim-checked payload. A missing event is ErrNotStored.
func TurnEvent(ctx context.Context, js jetstream.JetStream, stage, conv, turn string) (*jetstream.RawStreamMsg, []byte, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	subject := contracts.Subject(stage, conv, turn)
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil, fmt.Errorf("no stored %s event for turn %s of conversation %s (never reached that stage, or trimmed from history): %w", stage, turn, conv, ErrNotStored)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", subject, err)
	}
	data, err := claim.EventData(ctx, js, m.Header, m.Data)
	if err != nil {
		return nil, nil, err
	}
	return m, data, nil
}
