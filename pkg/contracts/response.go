package contracts

import (
	"cmp"

	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
)

// BaseResponse fills the fields every AgentExecuteResponse carries whatever
// happened: the ids, the mode, and non-nil lists (clients index them without
// checks). TurnId is Aptix's turn id: AGN-004 §2.1 lets an internal turn
// counter override response.id, and the client needs the id it sent.
func BaseResponse(req AgentExecuteRequest, sources []SourceRef, warnings []string) AgentExecuteResponse {
	r := AgentExecuteResponse{
		ConversationId:        req.ConversationId,
		TurnId:                req.TurnId,
		ConversationContextId: req.ConversationContextId,
		Mode:                  req.Mode,
		Sources:               append([]SourceRef{}, sources...),
		Warnings:              append([]string{}, warnings...),
		ToolCalls:             []AgentToolCall{},
	}
	if req.AgentContext != nil {
		r.AgentContextId = req.AgentContext.Id
	}
	if cc := req.ConversationContext; cc != nil {
		if r.ConversationContextId == "" {
			r.ConversationContextId = cc.Id
		}
		if r.Mode == "" {
			r.Mode = cc.Mode
		}
	}
	return r
}

// FailedResponse is the kind "error" response of a turn a stage rejected or
// gave up on (AGN-004 §3), e.g. invalid ToolsJson or an undecodable event.
func FailedResponse(req AgentExecuteRequest, f Failure, sources []SourceRef, warnings []string) AgentExecuteResponse {
	r := BaseResponse(req, sources, warnings)
	r.Kind, r.FinishReason = KindError, FinishError
	r.ErrorCode, r.ErrorMessage = f.Code, f.Message
	return r
}

// UpstreamUsage is a /responses body's usage object, in the Responses names
// and the Chat Completions names some servers send (AGN-004's example uses
// the latter): the typed document's (oresponse.Usage), with AGN-004's rule.
type UpstreamUsage oresponse.Usage

// tokenDetails is the breakdown of input (cached) or output (reasoning) tokens.
type tokenDetails = oresponse.TokenDetails

func written(d *tokenDetails) int {
	if d == nil {
		return 0
	}
	return d.CacheWriteTokens
}

func cached(d *tokenDetails) int {
	if d == nil {
		return 0
	}
	return d.CachedTokens
}

func reasoning(d *tokenDetails) int {
	if d == nil {
		return 0
	}
	return d.ReasoningTokens
}

// UsageOf is a typed document's usage in AGN-004's names (LlmUsage).
func UsageOf(u *oresponse.Usage) LlmUsage { return (*UpstreamUsage)(u).LlmUsage() }

// LlmUsage applies AGN-004 §2.3: the Responses name when it is set, else the
// Chat Completions one; a missing total is the sum; no usage object at all
// is zeros (unavailable fields default to 0). The mapper and the tool loop's
// usage sum both read usage so.
func (u *UpstreamUsage) LlmUsage() LlmUsage {
	if u == nil {
		return LlmUsage{}
	}
	out := LlmUsage{
		PromptTokens:     cmp.Or(u.InputTokens, u.PromptTokens),
		CompletionTokens: cmp.Or(u.OutputTokens, u.CompletionTokens),
		TotalTokens:      u.TotalTokens,
		CachedTokens:     cmp.Or(cached(u.InputTokensDetails), cached(u.PromptTokensDetails)),
		ReasoningTokens:  cmp.Or(reasoning(u.OutputTokensDetails), reasoning(u.CompletionTokensDetails)),
		CacheWriteTokens: written(u.InputTokensDetails),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}

// Plus sums usage: a tool loop's usage is every round's call.
func (u LlmUsage) Plus(o LlmUsage) LlmUsage {
	return LlmUsage{PromptTokens: u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens, TotalTokens: u.TotalTokens + o.TotalTokens,
		CachedTokens: u.CachedTokens + o.CachedTokens, ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens}
}
