// Package stage binds the AGN-004 mapping to the bus: it turns
// aptix.responded events into aptix.completed events and records the
// conversation's latest response for its next turn.
package stage

import (
	"context"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/mapper/mapping"
)

// ConversationStore is where the mapper records a conversation's latest turn.
type ConversationStore interface {
	Put(ctx context.Context, conversationID string, rec pipeline.Conversation) error
}

// Mapper maps results.
type Mapper struct {
	Conversations ConversationStore
}

// Stage returns the pipeline stage.
func (m *Mapper) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "mapper", In: contracts.StageResponded, Out: contracts.StageCompleted, Handle: m.Handle}
}

// Handle fills turn.Response and records the conversation on success.
func (m *Mapper) Handle(ctx context.Context, t *contracts.Turn) error {
	if t.LLM == nil || t.Envelope == nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "responded event has no llm or envelope section")
	}
	resp := mapping.Map(mapping.Input{Request: t.Request, LLM: *t.LLM, Sources: t.Envelope.Sources, Warnings: t.Warnings})
	if t.LLM.Cached {
		resp.Warnings = append(resp.Warnings, "result replayed from the pay-once store: the model was not called again")
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
	t.Response = &resp
	// A replay leaves the conversation's record alone unless asked
	// (aptix replay --continue): the conversation goes on from its own last turn.
	if resp.Kind == contracts.KindError || resp.ResponseContinuationId == "" || m.Conversations == nil || !pipeline.UpdatesConversation(ctx) {
		return nil
	}
	// Recorded before the completed event is published: a client that reads
	// its completion and sends the next turn at once finds the record.
	rec := pipeline.Conversation{
		ResponseId: resp.ResponseContinuationId, TurnId: t.TurnId, Backend: t.Envelope.Backend,
		Tools: t.Envelope.Tools, UpdatedAt: time.Now().UTC(),
	}
	if t.Tools != nil {
		rec.Pending = t.Tools.Pending
		rec.Approvals = t.Tools.Approvals
	}
	return m.Conversations.Put(ctx, t.ConversationId, rec)
}
