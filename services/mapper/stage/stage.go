// Package stage binds the AGN-004 mapping to the bus: it turns
// aptix.responded events into aptix.completed events and records the
// conversation's latest response for its next turn.
package stage

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/mapper/mapping"
)

// ConversationStore is where the mapper records a conversation's latest turn.
type ConversationStore interface {
	Put(ctx context.Context, conversationID string, rec store.Conversation) error
}

// Mapper maps results.
type Mapper struct {
	// JS is where a redelivered mapper finds the completion it stored
	// already; nil maps again and relies on the stream's de-duplication
	// window alone.
	JS            jetstream.JetStream
	Conversations ConversationStore
	// Usage, when set, adds each turn's tokens and cost to its principal's
	// totals (docs/usage-and-budgets.md).
	Usage UsageRecorder
}

// UsageRecorder accounts a turn's spend exactly once per turn key.
type UsageRecorder interface {
	Record(ctx context.Context, rec spend.Record) error
}

// usageRecord is what the accounting keeps of a completed turn.
func usageRecord(ctx context.Context, t *contracts.Turn) spend.Record {
	r := t.Response
	model := cmp.Or(t.Envelope.Model, r.ModelId)
	return spend.Record{
		Principal: t.Request.Principal, TurnKey: contracts.TurnKey(t.ConversationId, t.TurnId),
		Backend: t.Envelope.Backend, Model: model, At: time.Now().UTC(), Usage: r.Usage, Cost: *r.Cost,
		ReplayOf: pipeline.ReplayOf(ctx), Kind: r.Kind, KeyID: t.Request.KeyId,
	}
}

// Stage returns the pipeline stage.
func (m *Mapper) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "mapper", In: contracts.StageResponded, Out: contracts.StageCompleted, Handle: m.Handle}
}

// Handle fills turn.Response, stores the completed event and then records
// the turn's usage and the conversation's record.
//
// The completion goes first: the client waits for it and for nothing
// else, so the two records are written off its path, still before the
// input is acknowledged. A crash after the completion redelivers the input;
// the redelivery finds the stored completion (Output) and only does the
// records: the answer is never mapped or stored twice. A next turn that
// reaches the envelope before the record is written still continues from
// the completion (store.Conversations.Get reads both).
func (m *Mapper) Handle(ctx context.Context, t *contracts.Turn) error {
	if t.LLM == nil || t.Envelope == nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "responded event has no llm or envelope section")
	}
	stored := false
	if pipeline.Delivered(ctx) > 1 && m.JS != nil {
		prev, _, err := pipeline.Output(ctx, m.JS, t.ConversationId, t.TurnId, contracts.StageCompleted)
		if err != nil {
			return err
		}
		if prev != nil && prev.Response != nil {
			// The turn's answer is the stored one, whatever mapping
			// again would give.
			if err := pipeline.Emitted(ctx); err != nil {
				return err
			}
			if prev.LLM == nil || prev.Envelope == nil || prev.Response.Cost == nil {
				return nil // not a mapped answer (an error the runtime stored): nothing to record
			}
			*t = *prev
			stored = true
		}
	}
	if !stored {
		m.mapTurn(t)
		if err := pipeline.Emit(ctx, t); err != nil {
			return err
		}
	}
	if m.Usage != nil && (t.LLM.TurnId == "" || t.LLM.TurnId == t.TurnId) {
		// A replay from this stage re-maps a result made for another turn
		// (t.LLM.TurnId): no model call was paid for it, so it is not counted.
		// A redelivery records again: the accounting counts a turn key once.
		if err := m.Usage.Record(ctx, usageRecord(ctx, t)); err != nil {
			return err
		}
	}
	// A replay leaves the conversation's record alone unless asked
	// (aptix replay --continue): the conversation goes on from its own last turn.
	if m.Conversations == nil || !pipeline.UpdatesConversation(ctx) {
		return nil
	}
	rec, ok := store.ConversationOf(t, time.Now())
	if !ok {
		return nil
	}
	return m.Conversations.Put(ctx, t.ConversationId, rec)
}

// mapTurn fills t.Response from the model's result.
func (m *Mapper) mapTurn(t *contracts.Turn) {
	in := mapping.Input{Request: t.Request, LLM: *t.LLM, Sources: t.Envelope.Sources, Warnings: t.Warnings}
	if t.LLM.Body != "" {
		// The typed result, decoded once: the mapping reads it, and it
		// stays with the turn (its bytes are response.rawResponseJson's).
		in.Result, _ = t.Result()
	}
	resp := mapping.Map(in)
	if t.LLM.Cached {
		resp.Warnings = append(resp.Warnings, "result replayed from the pay-once store: the model was not called again")
	}
	resp.Backend = t.LLM.Backend
	if n := len(t.LLM.Fallbacks); n > 0 && t.LLM.Error == nil {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("served by backend %s after %d other backend(s) failed (%s first)",
			t.LLM.Backend, n, t.LLM.Fallbacks[0].Backend))
	}
	if l := t.Tools; l != nil {
		// docs/mapping.md#usage: a tool loop's usage is every round's, not the last call's.
		resp.Usage = resp.Usage.Plus(l.Usage)
		if l.Status == "" {
			l.Status = contracts.LoopCompleted
		}
		if l.StartedAtMs > 0 && l.DurationMs == 0 {
			l.DurationMs = time.Now().UnixMilli() - l.StartedAtMs
		}
	}
	// Charged once, at the price the envelope recorded, on the whole
	// turn's usage: every call of a tool loop ran on the same model.
	cost := t.Envelope.Price.Cost(resp.Usage)
	resp.Cost = &cost
	t.Response = &resp
	carryOnce(t)
}

// carryOnce drops from the completed event what the mapper's result holds
// already, so every reader of the completion (the gateway, each waiting
// client, the webhooks) decodes the upstream body once, not twice:
// rawResponseJson is the verbatim body, so the LLM section keeps no copy
// of it (Body, or UpstreamBody under tool emulation, whose rewrite stays in
// Body for the gateway's output items); response.sources is the
// envelope's list; the emulated tools were the LLM caller's. The responded event, which a replay of this stage
// starts from, keeps them all. The event is a version 2 document
// (contracts.TurnVersion) whoever started the turn.
func carryOnce(t *contracts.Turn) {
	raw := t.Response.RawResponseJson
	switch l := t.LLM; {
	case l.UpstreamBody != "" && l.UpstreamBody == raw:
		l.UpstreamBody = ""
	case l.UpstreamBody == "" && l.Body == raw:
		l.Body = ""
	}
	t.Envelope.Sources = nil // a copy in response.sources (contracts.BaseResponse)
	// Only the LLM caller reads the emulated tools (a tool loop's next
	// round goes on from the responded event, which keeps them).
	t.Envelope.ToolEmulation = nil
	t.Version = contracts.TurnVersion
}
