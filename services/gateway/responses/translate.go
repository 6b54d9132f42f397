package responses

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// Target is where a create request goes: the Aptix conversation and turn the
// adapter chose (a new conversation, the one continued, or a branch), the
// backend profile and model, and the upstream response id to continue from.
type Target struct {
	ConversationID string
	TurnID         string
	Backend        string
	Model          string
	// ContinueFrom is the upstream response id the turn continues (empty on
	// a first turn): with it the upstream's history is exactly the chain up
	// to the previous response, which is what makes branching correct.
	ContinueFrom string
	// Rule is the alias rule of the model the client named (nil for a model
	// or a plain alias): the framing and retrieval its operator declared.
	Rule *profiles.Alias
}

// Framed reports whether a create request gets AGN-003's framing rather
// than reaching the model as sent: when the client asks for Aptix's turn
// with the aptix extension, or names an alias whose rule declares it
// (docs/request.md#which-rule-applies-when).
func Framed(r *CreateRequest, rule *profiles.Alias) bool {
	return r.Aptix != nil || (rule != nil && rule.Framing == contracts.FramingAGN003)
}

// ToExecute translates a create request into the turn's execute request.
// The instruction is the text of the last user message; the rest of what the
// client sent (other input items, image parts, fields the turn does not
// model) rides along in OpenAI so the envelope can put it upstream.
func ToExecute(r *CreateRequest, t Target) (contracts.AgentExecuteRequest, *Error) {
	req := contracts.AgentExecuteRequest{
		ConversationId: t.ConversationID, TurnId: t.TurnID, ResponseContinuationId: t.ContinueFrom,
		AgentContext:    &contracts.AgentContext{Backend: t.Backend, Model: t.Model},
		MaxOutputTokens: r.MaxOutputTokens, ToolChoiceName: r.ToolChoice, Stream: r.Stream,
	}
	framed := Framed(r, t.Rule)
	req.Framing = contracts.FramingNone
	if framed {
		req.Framing = contracts.FramingAGN003
	}
	if r.Instructions != "" && framed {
		// AGN-003 governs the system prompt: a system message on the first
		// turn only, carried forward by previous_response_id afterwards.
		req.ConversationContext = &contracts.ConversationContext{SystemPrompt: r.Instructions}
	}
	if len(r.Tools) > 0 {
		req.ToolsJson = string(r.Tools)
	}
	idx, instruction := Instruction(r.Input)
	req.Instruction = instruction
	// Retrieval runs when the client asks for it: a file_search tool, or the
	// aptix extension naming a workspace or scope. A stock request gets none.
	req.RagScope = contracts.RagScopeNone
	if fs := r.FileSearch; fs != nil {
		req.WorkspaceId, req.Repo, req.Language, req.Tags = fs.Workspace, fs.Repo, fs.Language, fs.Tags
		req.RagScope = contracts.RagScopeWorkspace
		if fs.Repo != "" {
			req.RagScope = contracts.RagScopeRepo
		}
	}
	if a := t.Rule; a != nil {
		req.Mode = a.Mode
		if rr := a.Retrieval; rr != nil && rr.Scope != contracts.RagScopeNone {
			req.WorkspaceId, req.Repo, req.Language, req.Tags = rr.Workspace, rr.Repo, rr.Language, rr.Tags
			req.RagScope = cmp.Or(rr.Scope, contracts.RagScopeWorkspace)
			req.AgentContext.Index = rr.Index
		}
	}
	if x := r.Aptix; x != nil {
		if x.WorkspaceId != "" || x.RagScope != "" {
			req.RagScope = contracts.RagScopeWorkspace
		}
		req.Mode = x.Mode
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&req.WorkspaceId, x.WorkspaceId)
		set(&req.Repo, x.Repo)
		set(&req.Language, x.Language)
		set(&req.RagScope, x.RagScope)
		if len(x.Tags) > 0 {
			req.Tags = x.Tags
		}
		req.ActiveFiles = x.ActiveFiles
		// A server-side context supplies the boot prompt, unless the request
		// has instructions of its own (the inline context wins in the envelope).
		req.ConversationContextId = x.ConversationContextId
		req.AgentContext.Index = x.Index
		if x.Backend != "" {
			// An explicit profile wins over the one serving the model; the
			// envelope rejects an unknown one (unknown_backend, a 400).
			req.AgentContext.Backend = x.Backend
		}
	}
	if idx < 0 && r.FileSearch == nil && (r.Aptix == nil || r.Aptix.RagScope == "") && (t.Rule == nil || t.Rule.Retrieval == nil) {
		req.RagScope = contracts.RagScopeNone // a tool-output round has no question to retrieve for
	}
	input, err := json.Marshal(r.Input)
	if err != nil {
		return req, Internal("encode_input", err.Error())
	}
	pt := &contracts.OpenAIPassthrough{Input: input, InstructionItem: idx}
	if !framed {
		pt.Instructions = r.Instructions
	}
	if len(r.Fields) > 0 {
		if pt.Fields, err = json.Marshal(r.Fields); err != nil {
			return req, Internal("encode_fields", err.Error())
		}
	}
	req.OpenAI = pt
	if err := req.Validate(); err != nil {
		return req, invalid("input", CodeInvalidValue, "%v", err)
	}
	return req, nil
}

// Instruction finds the turn's instruction: the text of the last user
// message (idx is its index), else idx -1 and a short description of the
// round (e.g. the function_call_output items it carries). The user message
// need not be the last item: a client that keeps its own tool rounds sends
// the question, the function_call and its function_call_output, and the
// AGN-003 message must take the question's place, before the call, so the
// model sees the call answered rather than asked again.
func Instruction(items []json.RawMessage) (idx int, text string) {
	for i := len(items) - 1; i >= 0; i-- {
		var m struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(items[i], &m)
		if (m.Type == "message" || m.Type == "") && m.Role == "user" {
			text := messageText(m.Content)
			if strings.TrimSpace(text) == "" {
				text = "(see the attached input)" // an image- or file-only message
			}
			return i, text
		}
	}
	var calls []string
	for _, it := range items {
		var o struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(it, &o) == nil && o.Type == "function_call_output" {
			calls = append(calls, o.CallID)
		}
	}
	if len(calls) > 0 {
		return -1, "Function call outputs: " + strings.Join(calls, ", ")
	}
	return -1, "Continue from the input items."
}

// messageText joins a message's text parts (or returns its string content).
func messageText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	var texts []string
	for _, p := range parts {
		if (p.Type == "input_text" || p.Type == "text" || p.Type == "output_text") && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
