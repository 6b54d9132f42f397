// Package stage binds the envelope domain (contextblock, request) to the bus:
// it turns aptix.retrieved events into aptix.enveloped events.
package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/request"
)

// ConversationStore is where the envelope reads what the last turn sent.
// The mapper writes the record after the completion, so Get must also
// answer for a completion whose record is not written yet
// (store.Conversations.Get reads both at once).
type ConversationStore interface {
	Get(ctx context.Context, conversationID string) (*store.Conversation, error)
}

// Envelope builds a turn's /responses body.
type Envelope struct {
	Profiles *profiles.Set
	// Contexts are server-side ConversationContexts, by id, for requests that
	// name one instead of sending it inline.
	Contexts map[string]contracts.ConversationContext
	// Conversations supplies the previous response id and tools; nil means
	// clients always send responseContinuationId themselves.
	Conversations ConversationStore
	// Budget bounds the [CONTEXT] block.
	Budget contextblock.Options
	// MCP turns a request's mcp tools into a server-side tool loop.
	MCP request.MCPOptions
}

// Stage returns the pipeline stage.
func (e *Envelope) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "envelope", In: contracts.StageRetrieved, Out: contracts.StageEnveloped, Handle: e.Handle, Route: route}
}

// route sends a turn with server-side tools to the toolrunner first, which
// lists them and offers them to the model (docs/architecture.md#the-server-side-tool-loop).
func route(t *contracts.Turn) string {
	if t.Tools != nil && len(t.Tools.Tools) == 0 && t.LLM == nil {
		return contracts.StageToolRound
	}
	return contracts.StageEnveloped
}

// profile picks the turn's backend: the one agentContext.backend names, else
// the one serving the agent's model (profiles.Set.Route, docs/backends.md),
// else the default. A routed model is rewritten in req (a copy of the
// agent context) to what the profile is asked for: aliases resolved, a
// "profile/" prefix removed.
func (e *Envelope) profile(req *contracts.AgentExecuteRequest) (profiles.Profile, error) {
	p, ac, err := e.Profiles.ForAgent(req.AgentContext)
	if err != nil {
		return p, pipeline.Reject("unknown_backend", "agentContext.backend: %v", err)
	}
	req.AgentContext = ac
	return p, nil
}

// Handle fills turn.Envelope.
func (e *Envelope) Handle(ctx context.Context, t *contracts.Turn) error {
	req := t.Request
	conv, err := e.conversationContext(req)
	if err != nil {
		return err
	}
	profile, err := e.profile(&req)
	if err != nil {
		return err
	}

	var prior []tooldef.Tool
	var pending []json.RawMessage
	var history int // what the backend holds for the continuation (contracts.Envelope.HistoryTokens)
	var approvals []contracts.PendingApproval
	// A replay sees the conversation as its original did: aptix replay pins
	// the original's continuation in the request, and the record, which may
	// have moved on since, is not consulted (unless the replay continues the
	// conversation: --continue, or a whole conversation replayed into a new one).
	// A turn that starts its conversation has nothing on record to read.
	if e.Conversations != nil && !req.NewConversation && pipeline.UpdatesConversation(ctx) {
		rec, err := e.Conversations.Get(ctx, req.ConversationId)
		if err != nil {
			return err // transient: retried
		}
		if rec != nil {
			// The client may leave continuation to Aptix: the conversation's
			// latest response id is on record.
			if req.ResponseContinuationId == "" && rec.ResponseId != "" && (req.OpenAI == nil || !req.OpenAI.WholeHistory) {
				req.ResponseContinuationId = rec.ResponseId
				t.Request.ResponseContinuationId = rec.ResponseId
			}
			if req.ResponseContinuationId == rec.ResponseId {
				pending, approvals = rec.Pending, rec.Approvals
			}
			if req.ResponseContinuationId != "" {
				// An earlier response of the conversation holds no more
				// than its latest (compaction aside).
				history = rec.ContextTokens
			}
			if len(rec.Tools) > 0 && rec.Backend == profile.Name {
				if err := json.Unmarshal(rec.Tools, &prior); err != nil {
					return pipeline.Reject(pipeline.CodeInvalidEvent, "recorded tools of conversation %s: %v", req.ConversationId, err)
				}
			}
		}
	}

	var chunks []contracts.RagChunk
	if t.Retrieval != nil {
		chunks = t.Retrieval.Chunks
	}
	block := contextblock.Format(chunks, e.Budget)
	if len(req.Budgets) > 0 && req.MaxOutputTokens == 0 {
		// A budget reserves each call's worst case, so the call must have
		// one: a budgeted turn that names no output limit gets the
		// profile's (docs/usage-and-budgets.md#the-reservation-rule).
		req.MaxOutputTokens = profile.BudgetMaxOutput()
	}
	// The body is built, with an HTTP gateway client's fields and input
	// items (docs/request.md#what-an-http-client-adds), the server-side
	// tools, the client's answers to waiting approvals and the pending
	// server-side outputs merged in, and encoded once.
	res, err := request.Build(request.Input{
		Request: req, Conversation: conv, ContextBlock: block.Text,
		Capabilities: profile.Capabilities, PriorTools: prior, DefaultModel: profile.DefaultModel,
		MCP: &e.MCP, Approvals: approvals, Pending: pending,
	})
	loop := res.Loop
	if err == nil && loop != nil && profile.Capabilities.ToolMode == profiles.ToolModePrompt {
		// The toolrunner offers MCP tools as native function tools,
		// which a backend that emulates function calling never sees.
		return pipeline.Reject(tooldef.CodeInvalidTools, "mcp tools need a backend with native function calling; backend %q emulates it (toolMode prompt)", profile.Name)
	}
	if decisions := res.Decisions; err == nil && len(decisions) > 0 {
		// Calls the last turn left for the client's approval: the
		// toolrunner runs or skips each call before the first LLM call
		// of this turn.
		if loop == nil {
			// The client did not send the mcp tools again: the servers of
			// the waiting calls are this turn's.
			loop = &contracts.ToolLoop{MaxDepth: e.MCP.MaxDepth}
			if loop.MaxDepth == 0 {
				loop.MaxDepth = request.DefaultMaxToolDepth
			}
			for _, d := range decisions {
				if !slices.ContainsFunc(loop.Servers, func(u contracts.MCPServerUse) bool { return u.Label == d.Server }) {
					loop.Servers = append(loop.Servers, contracts.MCPServerUse{Label: d.Server, RequireApproval: "always"})
				}
			}
		}
		loop.Resume = decisions
	}
	var coded interface{ Code() string }
	if errors.As(err, &coded) {
		return pipeline.Reject(coded.Code(), "%v", err)
	}
	if err != nil {
		return err
	}
	tools, err := json.Marshal(res.Tools)
	if err != nil {
		return fmt.Errorf("encode tools: %w", err)
	}
	sources := make([]contracts.SourceRef, 0, len(block.Included))
	for _, c := range block.Included {
		sources = append(sources, c.Ref())
	}
	t.Warnings = append(t.Warnings, block.Warnings...)
	t.Envelope = &contracts.Envelope{
		Backend: profile.Name, Model: res.Model, Body: res.Body, Sources: sources,
		Tools: tools, ContextChars: len(block.Text), Price: profile.Price(res.Model),
		HistoryTokens: history,
	}
	if res.Emulation != nil {
		emulated, err := json.Marshal(res.Emulation.Tools)
		if err != nil {
			return fmt.Errorf("encode emulated tools: %w", err)
		}
		t.Envelope.ToolEmulation = &contracts.ToolEmulation{Tools: emulated, ToolChoice: res.Emulation.ToolChoice}
	}
	t.Tools = loop
	dropChunks(t.Retrieval)
	return nil
}

// dropChunks removes the chunk list once the context block in the body
// carries the chunks' text and Envelope.Sources lists those used: later
// events would otherwise carry every chunk again (a third of a turn's
// bytes with 8 chunks, their metadata a tenth after the text). The
// retrieved event, which is what a replay of this stage, `aptix events`
// and the console's retrieval view read, keeps the chunks whole.
func dropChunks(r *contracts.Retrieval) {
	if r != nil {
		r.Chunks = nil
	}
}

// conversationContext resolves the request's ConversationContext: inline,
// or by id from the server's configuration.
func (e *Envelope) conversationContext(req contracts.AgentExecuteRequest) (contracts.ConversationContext, error) {
	if req.ConversationContext != nil {
		return *req.ConversationContext, nil
	}
	if req.ConversationContextId == "" {
		return contracts.ConversationContext{}, nil
	}
	c, ok := e.Contexts[req.ConversationContextId]
	if !ok {
		return c, pipeline.Reject("unknown_conversation_context", "conversationContextId %q is not configured on this server", req.ConversationContextId)
	}
	return c, nil
}
