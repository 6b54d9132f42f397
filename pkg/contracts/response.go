package contracts

import "cmp"

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
// the latter).
type UpstreamUsage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	TotalTokens      int `json:"total_tokens"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`

	InputTokensDetails      *tokenDetails `json:"input_tokens_details"`
	OutputTokensDetails     *tokenDetails `json:"output_tokens_details"`
	PromptTokensDetails     *tokenDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails *tokenDetails `json:"completion_tokens_details"`
}

// tokenDetails is the breakdown of input (cached) or output (reasoning) tokens.
type tokenDetails struct {
	CachedTokens    int `json:"cached_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	// CacheWriteTokens are the input tokens written to the prompt cache:
	// no OpenAI field, the anthropic-messages backend's translation of
	// cache_creation_input_tokens (services/llmcaller/anthropicmessages).
	CacheWriteTokens int `json:"cache_write_tokens"`
}

func (d *tokenDetails) written() int {
	if d == nil {
		return 0
	}
	return d.CacheWriteTokens
}

func (d *tokenDetails) cached() int {
	if d == nil {
		return 0
	}
	return d.CachedTokens
}

func (d *tokenDetails) reasoning() int {
	if d == nil {
		return 0
	}
	return d.ReasoningTokens
}

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
		CachedTokens:     cmp.Or(u.InputTokensDetails.cached(), u.PromptTokensDetails.cached()),
		ReasoningTokens:  cmp.Or(u.OutputTokensDetails.reasoning(), u.CompletionTokensDetails.reasoning()),
		CacheWriteTokens: u.InputTokensDetails.written(),
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
