package contracts

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
