package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// ReplayInput maps a stage to re-run from to the stage of the event it
// consumes: each stage of the main line (layout.MainLine), and "requested"
// for the first.
var ReplayInput = replayInputs()

func replayInputs() map[string]string {
	m := map[string]string{contracts.StageRequested: contracts.StageRequested}
	for _, st := range layout.MainLine() {
		m[st.Name] = st.In
	}
	return m
}

// ReplayChoices names the stages a replay can start from, for help texts
// and errors: "retriever (or requested), envelope, llmcaller or mapper".
func ReplayChoices() string {
	names := layout.MainNames()
	if len(names) == 0 {
		return contracts.StageRequested
	}
	names[0] += " (or " + contracts.StageRequested + ")"
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ReplaySpec says which stored event to re-drive and what to change in it.
type ReplaySpec struct {
	Conversation, Turn string
	// From is the stage to re-run: retriever (or requested), envelope, llmcaller, mapper.
	From string
	// Backend and Model retarget the model call (not with From mapper).
	Backend, Model string
	// Into is the conversation to replay into (default the original's);
	// NewTurn the replay's turn id (required).
	Into, NewTurn string
	// Stream asks for streamed deltas; Continue lets the replay move the
	// conversation's continuation record.
	Stream, Continue bool
	// Pin keeps the original's continuation (previous response id) so the
	// replay sees the conversation as the original did.
	Pin bool
	// DefaultModel names a backend profile's default model, for a new
	// Backend without a Model replayed from the llmcaller (nil: a Model is required).
	DefaultModel func(backend string) (string, error)
}

// Validate checks the spec's ids and stage before anything is read.
func (f ReplaySpec) Validate() error {
	if !contracts.IsToken(f.Conversation) || !contracts.IsToken(f.Turn) {
		return inputf("a replay needs the turn's conversation and turn ids: 1-%d characters of [A-Za-z0-9_-]", contracts.MaxIDLen)
	}
	if _, ok := ReplayInput[f.From]; !ok {
		return inputf("from %q: want %s", f.From, ReplayChoices())
	}
	for _, id := range []string{f.Into, f.NewTurn} {
		if id != "" && !contracts.IsToken(id) {
			return inputf("%q: ids are 1-%d characters of [A-Za-z0-9_-]", id, contracts.MaxIDLen)
		}
	}
	if f.From == "mapper" && (f.Backend != "" || f.Model != "") {
		return inputf("a backend or model changes the model call: replay from the llmcaller (or earlier) for that")
	}
	return nil
}

// BuildReplay turns the stored input of the From stage into the event to
// publish with pipeline.PublishReplay: a new turn id (and conversation with
// Into), the backend and model applied.
func BuildReplay(ctx context.Context, js jetstream.JetStream, f ReplaySpec) (pipeline.ReplayEvent, error) {
	if err := f.Validate(); err != nil {
		return pipeline.ReplayEvent{}, err
	}
	if f.NewTurn == "" {
		return pipeline.ReplayEvent{}, errors.New("a replay needs its new turn id")
	}
	in := ReplayInput[f.From]
	source := in
	if in == contracts.StageRequested {
		source = contracts.StageRetrieved // requests leave the queue; the retrieved event recorded it
	}
	m, data, err := TurnEvent(ctx, js, source, f.Conversation, f.Turn)
	entered := false
	if errors.Is(err, ErrNotStored) && source == contracts.StageRetrieved {
		// A turn that skipped the envelope too has no retrieved event: its
		// entry event holds the request (docs/architecture.md#entry-points).
		if em, edata, eerr := TurnEvent(ctx, js, contracts.StageEnveloped, f.Conversation, f.Turn); eerr == nil && slices.Contains(Skipped(em.Header), "envelope") {
			m, data, err, entered = em, edata, nil, true
		}
	}
	if err != nil {
		return pipeline.ReplayEvent{}, err
	}
	var t contracts.Turn
	if err := json.Unmarshal(data, &t); err != nil {
		return pipeline.ReplayEvent{}, fmt.Errorf("decode %s: %w", m.Subject, err)
	}
	if entered {
		// The retrieved event it would have had: the request and the
		// retriever's section, before the envelope's.
		t.Envelope, t.Tools = nil, nil
		if err := pipeline.FillSkipped("retriever", &t, pipeline.Skipping{}); err != nil {
			return pipeline.ReplayEvent{}, err
		}
	}
	conv, turn := f.Into, f.NewTurn
	if conv == "" {
		conv = f.Conversation
	}
	t.ConversationId, t.TurnId = conv, turn
	t.Request.ConversationId, t.Request.TurnId = conv, turn
	if f.Stream {
		t.Request.Stream = true
	}
	if f.Pin && t.Request.ResponseContinuationId == "" && f.Backend == "" && (in == contracts.StageRequested || in == contracts.StageRetrieved) {
		// The envelope fills the continuation from the conversation's record,
		// which may have moved on since: take the one the original was sent with.
		if _, env, err := TurnEvent(ctx, js, contracts.StageEnveloped, f.Conversation, f.Turn); err == nil {
			var et contracts.Turn
			if json.Unmarshal(env, &et) == nil {
				t.Request.ResponseContinuationId = et.Request.ResponseContinuationId
			}
		}
	}
	// The original's conversation id may have been new to it
	// (newConversation); the replay's conversation is not new when the
	// replay continues it (--continue, or --into one that has turns), so
	// the envelope reads its record as for any replay that updates one.
	t.Request.NewConversation = false
	if conv != f.Conversation && t.Request.ResponseContinuationId != "" && t.Request.ContinuationConversation == "" {
		// The replay continues a response of the original's conversation
		// from another one: recovery reads the calls before it there.
		t.Request.ContinuationConversation = f.Conversation
	}
	switch in {
	case contracts.StageRequested, contracts.StageRetrieved:
		if f.Backend != "" || f.Model != "" {
			ac := contracts.AgentContext{}
			if t.Request.AgentContext != nil {
				ac = *t.Request.AgentContext
			}
			if f.Backend != "" {
				ac.Backend = f.Backend
			}
			if f.Model != "" {
				ac.Model = f.Model
			}
			t.Request.AgentContext = &ac
		}
	case contracts.StageEnveloped:
		if err := Retarget(&t, f.Backend, f.Model, f.DefaultModel); err != nil {
			return pipeline.ReplayEvent{}, err
		}
	}
	ev := pipeline.ReplayEvent{Stage: in, ConversationId: conv, TurnId: turn, Of: f.Turn, OrigHeader: m.Header,
		Continue: f.Continue || conv != f.Conversation}
	if in == contracts.StageRequested {
		ev.Data, err = json.Marshal(t.Request)
	} else {
		ev.Data, err = json.Marshal(t)
	}
	if err != nil {
		return ev, fmt.Errorf("encode replay: %w", err)
	}
	return ev, nil
}

// Retarget points an enveloped turn at another backend or model: the
// envelope's backend and model and the body's "model", which is sent as is.
// A new backend without a model takes defaultModel(backend).
func Retarget(t *contracts.Turn, backend, model string, defaultModel func(string) (string, error)) error {
	if backend == "" && model == "" {
		return nil
	}
	if t.Envelope == nil || len(t.Envelope.Body) == 0 {
		return errors.New("the enveloped event has no request body to replay")
	}
	if backend != "" {
		t.Envelope.Backend = backend
		if model == "" {
			if defaultModel == nil {
				return inputf("backend %s without a model: give the model", backend)
			}
			m, err := defaultModel(backend)
			if err != nil {
				return inputf("backend %s without a model: %v; give the model", backend, err)
			}
			model = m
		}
	}
	t.Envelope.Model = model
	var body map[string]json.RawMessage
	if err := json.Unmarshal(t.Envelope.Body, &body); err != nil {
		return fmt.Errorf("the enveloped body is not a JSON object: %w", err)
	}
	m, _ := json.Marshal(model)
	body["model"] = m
	out, err := json.Marshal(body)
	if err != nil {
		return err
	}
	t.Envelope.Body = out
	return nil
}
