package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Stages are the stored stages of a turn, in order (the request itself
// leaves the queue stream once the retriever takes it; the retrieved event
// records it): the main line's outputs (layout.EventStages).
var Stages = layout.EventStages()[1:]

// Producer names the stage that stores each event (layout.ProducerOf).
var Producer = producers()

func producers() map[string]string {
	m := map[string]string{}
	for _, st := range Stages {
		m[st], _ = layout.ProducerOf(st)
	}
	return m
}

// Skipped names the stages a turn did not visit, from the headers of the
// event it entered the pipeline with (contracts.HeaderSkipped, written by
// pipeline.Entrance); nil for an event a stage wrote. No event of a
// skipped stage exists: history shows it as skipped, never as run.
func Skipped(h map[string][]string) []string {
	v := h[contracts.HeaderSkipped]
	if len(v) == 0 || v[0] == "" {
		return nil
	}
	return strings.Split(v[0], ",")
}

// Writer names who stored a turn's event of stage: the stage that produces
// it, or, for the event a turn entered with past skipped stages, the
// client that wrote it (its ce-source, e.g. "gateway").
func Writer(stage string, h map[string][]string) string {
	if Skipped(h) == nil {
		return Producer[stage]
	}
	if src := h[contracts.HeaderCESource]; len(src) > 0 && src[0] != "" {
		return strings.TrimPrefix(src[0], "aptix/")
	}
	return "client"
}

// TurnView is a turn's stored events by stage; a replay started past the
// first stages has none for them.
type TurnView struct {
	Conversation, Turn string
	Turns              map[string]contracts.Turn
	Times              map[string]time.Time
	// Msgs are the stored messages (headers, sequence, size) by stage.
	Msgs map[string]*jetstream.RawStreamMsg
}

// Last is the turn's most advanced stored event and its stage.
func (v TurnView) Last() (string, contracts.Turn, bool) {
	for i := len(Stages) - 1; i >= 0; i-- {
		if t, ok := v.Turns[Stages[i]]; ok {
			return Stages[i], t, true
		}
	}
	return "", contracts.Turn{}, false
}

// Response is the turn's AgentExecuteResponse (zero when not completed).
func (v TurnView) Response() contracts.AgentExecuteResponse {
	if r := v.Turns[contracts.StageCompleted].Response; r != nil {
		return *r
	}
	return contracts.AgentExecuteResponse{}
}

// FindConversation returns the conversation a turn id was stored under.
func FindConversation(ctx context.Context, js jetstream.JetStream, turn string) (string, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.SubjectPrefix+".*.*."+turn))
	if err != nil {
		return "", fmt.Errorf("stream info: %w", err)
	}
	convs := map[string]bool{}
	for subj := range info.State.Subjects {
		if _, c, _, ok := contracts.ParseSubject(subj); ok {
			convs[c] = true
		}
	}
	switch len(convs) {
	case 0:
		return "", fmt.Errorf("no stored events for turn %s (trimmed from history, or a typo?): %w", turn, ErrNotStored)
	case 1:
		for c := range convs {
			return c, nil
		}
	}
	names := make([]string, 0, len(convs))
	for c := range convs {
		names = append(names, c)
	}
	sort.Strings(names)
	return "", inputf("turn %s is in several conversations (%s): give its conversation", turn, strings.Join(names, ", "))
}

// LoadTurn reads the turn's last event at every stage (conv "" finds the
// conversation from the stream).
func LoadTurn(ctx context.Context, js jetstream.JetStream, conv, turn string) (TurnView, error) {
	if conv == "" {
		var err error
		if conv, err = FindConversation(ctx, js, turn); err != nil {
			return TurnView{}, err
		}
	}
	v := TurnView{Conversation: conv, Turn: turn, Turns: map[string]contracts.Turn{}, Times: map[string]time.Time{},
		Msgs: map[string]*jetstream.RawStreamMsg{}}
	for _, stage := range Stages {
		m, data, err := TurnEvent(ctx, js, stage, conv, turn)
		if err != nil {
			continue // not reached, started later (a replay), or trimmed
		}
		var t contracts.Turn
		if err := json.Unmarshal(data, &t); err != nil {
			return v, fmt.Errorf("decode %s: %w", m.Subject, err)
		}
		v.Turns[stage], v.Times[stage], v.Msgs[stage] = t, m.Time, m
	}
	if len(v.Turns) == 0 {
		return v, fmt.Errorf("no stored events for turn %s of conversation %s: %w", turn, conv, ErrNotStored)
	}
	return v, nil
}

// Skipped names the stages the turn did not visit (see Skipped): read from
// its stored entry event, nil when that event is a stage's or not stored.
func (v TurnView) Skipped() []string {
	for _, s := range Stages {
		if m := v.Msgs[s]; m != nil {
			return Skipped(m.Header)
		}
	}
	return nil
}

// TraceOf is the trace id on the turn's last stored event.
func (v TurnView) TraceOf() string {
	for i := len(Stages) - 1; i >= 0; i-- {
		if m := v.Msgs[Stages[i]]; m != nil {
			return TraceID(m.Header)
		}
	}
	return "-"
}

// ConversationTurns lists the conversation's turns in the order they were
// last retrieved (each turn once, however often it was retried), a turn
// that skipped the envelope too (no retrieved event) where it entered. With
// branches false it leaves out replays that did not continue the
// conversation (side branches).
func ConversationTurns(ctx context.Context, js jetstream.JetStream, conv string, branches bool) ([]string, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	// The events a turn entered with: retrieved, or enveloped past both
	// skippable stages (the last enveloped event of any other turn is
	// read too, and left out below).
	var filters []string
	n := 0
	for _, entry := range layout.Entries()[1:] {
		filter := contracts.Subject(entry, conv, "*")
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("stream info: %w", err)
		}
		if len(info.State.Subjects) > 0 {
			filters = append(filters, filter)
			n += len(info.State.Subjects)
		}
	}
	if n == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters,
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", strings.Join(filters, ", "), err)
	}
	var turns []string
	for range n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				break
			}
			return nil, err
		}
		stage, _, turn, _ := contracts.ParseSubject(m.Subject())
		h := m.Headers()
		// A turn's retrieved event, or the enveloped event it entered with.
		entry := stage == contracts.StageRetrieved || slices.Contains(Skipped(h), "retriever")
		// A replay that did not continue the conversation is a side branch.
		if entry && (branches || h.Get(contracts.HeaderReplayOf) == "" || h.Get(contracts.HeaderReplayContinue) == "true") {
			turns = append(turns, turn)
		}
		if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
			break
		}
	}
	return turns, nil
}
