// Package stage binds the LLM caller to the bus: it turns aptix.enveloped
// events into aptix.responded events.
package stage

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/llmcaller/anthropicmessages"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/chatcompletions"
)

// LLMCaller calls the turn's backend.
type LLMCaller struct {
	Caller *caller.Caller
	// NC publishes streaming deltas (core NATS, not stored); nil disables them.
	NC *nats.Conn
	// Deltas, when set, receives the streaming deltas instead of NC: a
	// test sees what a client would.
	Deltas caller.DeltaSink
	// Cancels, when set, makes cancellation real: a turn
	// cancelled before its call is never sent upstream, and one cancelled
	// during it has its call's context cancelled at once. Either way the
	// turn ends with a cancelled rejection, so its completion (and webhook)
	// still comes, and a redelivery never pays for it.
	Cancels *store.Cancels
	// Budgets, when set, holds each model call's worst case against its
	// principal's budgets (contracts.AgentExecuteRequest.Budgets) before
	// the model is called, refusing a call that does not fit, and settles
	// the hold to the call's real cost after it (budget.go,
	// docs/usage-and-budgets.md#the-reservation-rule).
	Budgets BudgetHolder
	// JS, when set, makes the stage's output event the call's pay-once
	// result: the stage stores it itself (pipeline.Emit) as soon as the
	// model has answered, the caller's store keeps only the call record,
	// and a redelivery finds the event (pipeline.Output) before the record.
	// Without it the result is stored by the caller and the runtime
	// publishes the event.
	JS jetstream.JetStream
}

// CodeBudgetExceeded is the error code of a turn refused by a budget.
const CodeBudgetExceeded = "budget_exceeded"

// Stage returns the pipeline stage.
func (l *LLMCaller) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded, Handle: l.Handle,
		Route: Route, Counters: l.counters}
}

// Route sends a result whose model called a server-side (MCP) tool to the
// toolrunner, which runs the calls and answers with the next round
// (docs/architecture.md#the-server-side-tool-loop); every other result goes on to the mapper.
func Route(t *contracts.Turn) string {
	if t.Tools != nil && t.LLM != nil && t.LLM.Error == nil && t.Tools.ServerCalls(t.LLM.Body) > 0 {
		return contracts.StageToolRound
	}
	return contracts.StageResponded
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
// another replica, which finds the stored event (or, with a call record
// and no event, re-attaches to the call) instead of paying again.
func (l *LLMCaller) Handle(ctx context.Context, t *contracts.Turn) error {
	if t.Envelope == nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "enveloped event has no envelope section")
	}
	// The turn is charged (and its budget counted) at the price of the
	// backend and model that serve the call, not the one the envelope
	// priced it at: a replay retargeted to another backend (`aptix replay
	// --backend`, the console's replay) kept the original model's price.
	if price, ok := l.Caller.Price(t.Envelope.Backend, t.Envelope.Model); ok {
		t.Envelope.Price = price
	}
	if l.JS != nil && pipeline.Delivered(ctx) > 1 {
		// Before the budget and the cancel are read: a turn whose answer
		// is stored is answered, whatever was spent or asked since.
		out, err := l.stored(ctx, t)
		if err != nil {
			return err // redelivered: never paid again for want of a read
		}
		if out != nil {
			return answered(ctx, t, out)
		}
	}
	held, err := l.reserve(ctx, t, contracts.CallKey(t))
	if err != nil {
		return err
	}
	// Each LLM call of a tool loop is paid once on its own: its key names
	// the conversation and the turn (contracts.TurnKey), then the round.
	in := caller.Input{
		ConversationID: t.ConversationId, ContinuationConversation: t.Request.ContinuationConversation,
		TurnID: contracts.CallKey(t), LegacyKey: legacyCallKey(t),
		Backend: t.Envelope.Backend, Model: t.Envelope.Model, Body: t.Envelope.Body,
		Stream: t.Request.Stream, Emulation: t.Envelope.ToolEmulation,
		// A first delivery skips the pay-once lookup (caller.Input.FirstDelivery).
		FirstDelivery: pipeline.Delivered(ctx) == 1,
	}
	var found *contracts.Turn // the output an earlier handling stored, if the caller's lookup found it
	if l.JS != nil {
		// A first delivery whose call record finds the key taken looks here
		// too. A redelivery has looked already, above: nothing was stored.
		in.Stored = func(ctx context.Context) (*contracts.LLMResult, error) {
			if pipeline.Delivered(ctx) > 1 {
				return nil, nil
			}
			out, err := l.stored(ctx, t)
			if out == nil || err != nil {
				return nil, err
			}
			found = out
			r := *out.LLM
			return &r, nil
		}
	}
	if in.Stream && (l.NC != nil || l.Deltas != nil) {
		in.Deltas = l.Deltas
		if in.Deltas == nil {
			in.Deltas = caller.NATSDeltas(l.NC, t.ConversationId, t.TurnId)
		}
		if r := t.Retrieval; r != nil && r.Scope != contracts.RagScopeNone {
			// The retrieval is done: a streamed file_search_call item
			// completes before the model's first delta.
			q := r.Query
			if q == "" {
				q = t.Request.Instruction
			}
			in.Deltas.Delta(ctx, caller.Delta{Type: caller.DeltaRetrieval, Text: q, Sources: t.Envelope.Sources})
		}
		if t.Tools != nil {
			in.Deltas = caller.LoopDeltas(in.Deltas, t.Tools)
		}
	}
	callCtx := ctx
	if l.Cancels != nil {
		var release func()
		var reason string
		var ok bool
		var err error
		if callCtx, release, reason, ok, err = l.Cancels.Watch(ctx, t.ConversationId, t.TurnId); err != nil {
			return err // redelivered: a cancel must be read before paying
		} else if ok {
			l.release(ctx, t, held)
			return pipeline.Reject(reason, "the response was cancelled (%s) before the model was called", reason)
		}
		defer release()
	}
	fallbackCtx := callCtx
	if pt := t.Request.OpenAI; pt != nil && len(pt.Chat) > 0 && t.Tools == nil && in.Emulation == nil {
		// A Chat Completions client's request goes to a Chat Completions
		// backend as it sent it (a Responses backend never reads it).
		callCtx = chatcompletions.WithClientBody(callCtx, pt.Chat)
	}
	if pt := t.Request.OpenAI; pt != nil {
		// A Messages client's request goes to a Messages backend as it sent
		// it, with its anthropic-version and anthropic-beta (the body only
		// when nothing rewrites the request: no tool loop, no emulation).
		c := anthropicmessages.Client{Version: pt.AnthropicVersion, Beta: pt.AnthropicBeta}
		if t.Tools == nil && in.Emulation == nil {
			c.Body = pt.Messages
		}
		callCtx = anthropicmessages.WithClient(callCtx, c)
	}
	res := l.callWithFallbacks(ctx, callCtx, fallbackCtx, t, in)
	if found != nil {
		l.settle(ctx, t, held, found.LLM) // the earlier handling's call is what this key cost
		return answered(ctx, t, found)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if errors.Is(context.Cause(callCtx), store.ErrCancelled) {
		_, reason, _, _ := l.Cancels.Reason(ctx, t.ConversationId, t.TurnId)
		if reason == "" {
			reason = store.CodeCancelled
		}
		// A background upstream response (capability reattach) keeps
		// generating, and billing, after its stream is dropped: stop it too.
		if upstream, err := l.Caller.CancelUpstream(ctx, in.TurnID); err == nil && upstream != "" {
			t.Warnings = append(t.Warnings, "upstream response "+upstream+" cancelled")
		}
		l.release(ctx, t, held) // a cancelled turn is not counted (docs/usage-and-budgets.md)
		return pipeline.Reject(reason, "the response was cancelled (%s) while the model was called; the call was aborted", reason)
	}
	res.TurnId = t.TurnId
	if len(res.Fallbacks) > 0 && res.Error == nil {
		// A fallback served: the turn is charged at its price, counted
		// under its model, and continued on it (the conversation record
		// names the envelope's backend), since only it holds the response.
		t.Envelope.Backend, t.Envelope.Model = res.Backend, res.Model
		if price, ok := l.Caller.Price(res.Backend, res.Model); ok {
			t.Envelope.Price = price
		}
	}
	l.settle(ctx, t, held, &res)
	t.LLM = &res
	t.Warnings = append(t.Warnings, res.Warnings...)
	// The body has been sent; later events need only the result. The
	// enveloped event, which a replay of this stage starts from, keeps it.
	// With 8 chunks this halves the responded and completed events.
	t.Envelope.Body = nil
	if l.JS == nil {
		return nil
	}
	// The event is the result, and with the enveloped event before it the
	// record conversation recovery reads (caller.CallLog). An error stores
	// nothing known: redelivered, the call record re-attaches.
	return pipeline.Emit(ctx, t)
}

// stored returns the output an earlier handling of t's event stored: the
// responded or toolround event of the same round, or of a later round of
// the tool loop (which only exists once this round's output was stored).
// A toolround event without a result is the envelope's, asking for the
// loop's tools: no output of this stage.
func (l *LLMCaller) stored(ctx context.Context, t *contracts.Turn) (*contracts.Turn, error) {
	out, _, err := pipeline.Output(ctx, l.JS, t.ConversationId, t.TurnId, contracts.StageResponded, contracts.StageToolRound)
	if err != nil {
		return nil, fmt.Errorf("look up the stored result of %s: %w", contracts.CallKey(t), err)
	}
	if out == nil || out.LLM == nil || round(out) < round(t) {
		return nil, nil
	}
	return out, nil
}

func round(t *contracts.Turn) int {
	if t.Tools == nil {
		return 0
	}
	return t.Tools.Round
}

// answered makes t the output an earlier handling stored and tells the
// runtime not to publish it again. A later round's event is not this
// round's output, only proof that it was stored: t stays as it came.
func answered(ctx context.Context, t *contracts.Turn, out *contracts.Turn) error {
	if round(out) == round(t) {
		*t = *out
		llm := *t.LLM
		llm.Cached = true
		t.LLM = &llm
		pipeline.ObserveCall(ctx, t) // a pay-once hit
	}
	return pipeline.Emitted(ctx)
}

// legacyCallKey is the pay-once key releases before keys named the
// conversation used (the turn id, then "<turn>_r<round>"): the caller only
// warns when a record is there, never answers from it (caller.Input.LegacyKey).
func legacyCallKey(t *contracts.Turn) string {
	if t.Tools == nil || t.Tools.Round == 0 {
		return t.TurnId
	}
	return t.TurnId + "_r" + strconv.Itoa(t.Tools.Round)
}
