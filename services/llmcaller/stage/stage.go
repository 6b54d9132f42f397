// Package stage binds the LLM caller to the bus: it turns aptix.enveloped
// events into aptix.responded events.
package stage

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// LLMCaller calls the turn's backend.
type LLMCaller struct {
	Caller *caller.Caller
	// NC publishes streaming deltas (core NATS, not stored); nil disables them.
	NC *nats.Conn
}

// Stage returns the pipeline stage.
func (l *LLMCaller) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded, Handle: l.Handle,
		Counters: l.counters}
}

// counters exports what happened to interrupted calls (caller.Stats) with
// the stage's stats: `nats micro stats aptix-llmcaller`.
func (l *LLMCaller) counters() map[string]int64 {
	s := l.Caller.Stats()
	return map[string]int64{"calls_reattached": s.Reattached, "calls_resumed": s.Resumed,
		"calls_repeated": s.Repeated, "calls_lost_upstream": s.Lost}
}

// Handle fills turn.LLM. Upstream failures are data for the mapper; only a
// cancelled context (shutdown) is an error, so the event is redelivered to
// another replica, which finds the stored result if the call had finished.
func (l *LLMCaller) Handle(ctx context.Context, t *contracts.Turn) error {
	if t.Envelope == nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "enveloped event has no envelope section")
	}
	in := caller.Input{
		ConversationID: t.ConversationId, TurnID: t.TurnId,
		Backend: t.Envelope.Backend, Model: t.Envelope.Model, Body: t.Envelope.Body,
		Stream: t.Request.Stream, Emulation: t.Envelope.ToolEmulation,
	}
	if in.Stream && l.NC != nil {
		in.Deltas = caller.NATSDeltas(l.NC, t.ConversationId, t.TurnId)
	}
	res := l.Caller.Call(ctx, in)
	if err := ctx.Err(); err != nil {
		return err
	}
	t.LLM = &res
	t.Warnings = append(t.Warnings, res.Warnings...)
	// The body has been sent; later events need only the result. The
	// enveloped event, which a replay of this stage starts from, keeps it.
	// With 8 chunks this halves the responded and completed events.
	t.Envelope.Body = nil
	return nil
}
