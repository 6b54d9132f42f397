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
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("stream info: %w", err)
		}
		var total uint64
		for _, n := range info.State.Subjects {
			total += n
		}
		if total == 0 {
			continue
		}
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filter, err)
		}
		for read := uint64(0); read < total; {
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
					break // the stream was trimmed while reading
				}
				return nil, fmt.Errorf("read %s: %w", filter, err)
			}
			read++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			data, err := claim.EventData(ctx, js, m.Headers(), m.Data())
			if err != nil {
				data = m.Data() // the stub still says what it was
			}
			e := Event{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(), Header: m.Headers(), Data: data}
			if stage, conv, turn, ok := contracts.ParseSubject(m.Subject()); ok && conv == conversation {
				e.Stage, e.Turn = stage, turn
			} else if orig := m.Headers().Get(contracts.HeaderDeadSubject); orig != "" {
				_, conv, turn, ok := contracts.ParseSubject(orig)
				if !ok || conv != conversation {
					continue
				}
				e.Stage, e.Turn = "dead."+m.Headers().Get(contracts.HeaderDeadStage), turn
			} else {
				continue
			}
			events = append(events, e)
			if md.NumPending == 0 {
				break
			}
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].Seq < events[j].Seq })
	return events, nil
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
