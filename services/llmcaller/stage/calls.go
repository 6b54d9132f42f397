package stage

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// EventCalls reads a conversation's model calls from its events in the
// APTIX stream (caller.CallLog), for conversation recovery: each call's
// body is the enveloped event this stage consumed (the envelope's, or the
// toolrunner's for a later round of the tool loop), its result the
// responded or toolround event this stage stored after it. It reads only
// those three stages of the one conversation, with one ordered consumer,
// and only when a backend has lost a response: a turn's own path reads and
// writes nothing for it.
type EventCalls struct{ JS jetstream.JetStream }

// callEvent is the part of a contracts.Turn a call is rebuilt from.
type callEvent struct {
	Envelope *struct {
		Backend string          `json:"backend"`
		Body    json.RawMessage `json:"body"`
	} `json:"envelope"`
	Request struct {
		ContinuationConversation string `json:"continuationConversation"`
	} `json:"request"`
	LLM   *contracts.LLMResult `json:"llm"`
	Tools *struct {
		Round int `json:"round"`
	} `json:"tools"`
}

func (e callEvent) round() int {
	if e.Tools == nil {
		return 0
	}
	return e.Tools.Round
}

// Calls pairs each stored result with the enveloped event of the same turn
// and round before it in the stream: the call that produced it. A result
// with no such event (a toolrunner's responded event repeating the last
// round's result, a replay started past this stage) is left out.
func (e EventCalls) Calls(ctx context.Context, conversationID string) ([]caller.LoggedCall, error) {
	events, err := history.StageEvents(ctx, e.JS, conversationID,
		contracts.StageEnveloped, contracts.StageToolRound, contracts.StageResponded)
	if err != nil {
		return nil, err
	}
	type sent struct {
		round   int
		backend string
		body    json.RawMessage
		from    string
	}
	last := map[string]*sent{} // by turn: its latest enveloped event not yet answered
	var calls []caller.LoggedCall
	for _, ev := range events {
		var t callEvent
		if json.Unmarshal(ev.Data, &t) != nil {
			continue
		}
		switch ev.Stage {
		case contracts.StageEnveloped:
			if t.Envelope != nil && len(t.Envelope.Body) > 0 {
				last[ev.Turn] = &sent{round: t.round(), backend: t.Envelope.Backend, body: t.Envelope.Body, from: t.Request.ContinuationConversation}
			}
		default:
			s := last[ev.Turn]
			if t.LLM == nil || s == nil || s.round != t.round() {
				continue // the envelope's toolround event (no result yet), or no call of this stage
			}
			backend := s.backend
			if len(t.LLM.Fallbacks) > 0 && t.LLM.Backend != "" {
				backend = t.LLM.Backend // a fallback served: only it holds the response
			}
			calls = append(calls, caller.LoggedCall{Backend: backend, Body: s.body, From: s.from, Result: *t.LLM})
			delete(last, ev.Turn)
		}
	}
	return calls, nil
}
