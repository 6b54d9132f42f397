package contracts

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Documented limits of an AgentExecuteRequest. They bound what one event can
// cost every stage; a client that needs more splits the work into turns.
const (
	MaxIDLen             = 128       // conversation, turn, context and workspace ids
	MaxContinuationIDLen = 512       // upstream response ids are opaque
	MaxInstructionBytes  = 256 << 10 // 256 KiB
	MaxSystemPromptBytes = 256 << 10 // 256 KiB
	MaxToolsJSONBytes    = 512 << 10 // 512 KiB, ToolsJson and DefaultTools each
	MaxModeLen           = 64
	MaxNameLen           = 256 // repo, language, model, backend, index, tool choice
	MaxTags              = 64
	MaxTagLen            = 128
	MaxActiveFiles       = 1024
	MaxPathLen           = 4096
	MaxOutputTokensLimit = 1 << 20
)

// FieldError names one invalid field by its JSON path.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every invalid field of a request, not just the first.
type ValidationError struct {
	Fields []FieldError `json:"fields"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

func (e *ValidationError) add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// IsToken reports whether s matches [A-Za-z0-9_-]{1,128}, the shape of every
// id that becomes a NATS subject token.
func IsToken(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Validate checks an execute request and returns a *ValidationError listing
// every problem, or nil.
func (r *AgentExecuteRequest) Validate() error {
	v := &ValidationError{}
	token := func(field, s string, required bool) {
		if s == "" {
			if required {
				v.add(field, "is required")
			}
			return
		}
		if !IsToken(s) {
			v.add(field, "must match [A-Za-z0-9_-]{1,%d}, got %q", MaxIDLen, clip(s))
		}
	}
	text := func(field, s string, max int) {
		if len(s) > max {
			v.add(field, "is %d bytes, limit %d", len(s), max)
		} else if !utf8.ValidString(s) {
			v.add(field, "is not valid UTF-8")
		}
	}

	token("conversationId", r.ConversationId, true)
	token("turnId", r.TurnId, true)
	token("conversationContextId", r.ConversationContextId, false)
	token("workspaceId", r.WorkspaceId, false)

	if strings.TrimSpace(r.Instruction) == "" {
		v.add("instruction", "must not be empty")
	}
	text("instruction", r.Instruction, MaxInstructionBytes)

	if r.ResponseContinuationId != "" {
		if len(r.ResponseContinuationId) > MaxContinuationIDLen || strings.ContainsFunc(r.ResponseContinuationId, isSpaceOrControl) {
			v.add("responseContinuationId", "must be at most %d bytes with no spaces or control characters", MaxContinuationIDLen)
		}
	}
	if len(r.Mode) > MaxModeLen || strings.ContainsFunc(r.Mode, isControl) {
		v.add("mode", "must be at most %d characters with no control characters", MaxModeLen)
	}
	text("repo", r.Repo, MaxNameLen)
	text("language", r.Language, MaxNameLen)
	text("toolChoiceName", r.ToolChoiceName, MaxNameLen)
	text("toolsJson", r.ToolsJson, MaxToolsJSONBytes)

	switch r.Framing {
	case "", FramingAGN003, FramingNone:
	default:
		v.add("framing", "must be agn003 or none; got %q", clip(r.Framing))
	}
	switch r.RagScope {
	case "", RagScopeNone, RagScopeActiveFiles, RagScopeRepo, RagScopeWorkspace:
	default:
		v.add("ragScope", "must be one of none, activeFiles, repo, workspace; got %q", clip(r.RagScope))
	}
	if len(r.Tags) > MaxTags {
		v.add("tags", "has %d entries, limit %d", len(r.Tags), MaxTags)
	}
	for i, t := range r.Tags {
		if t == "" || len(t) > MaxTagLen {
			v.add(fmt.Sprintf("tags[%d]", i), "must be 1 to %d bytes", MaxTagLen)
		}
	}
	if len(r.ActiveFiles) > MaxActiveFiles {
		v.add("activeFiles", "has %d entries, limit %d", len(r.ActiveFiles), MaxActiveFiles)
	}
	for i, p := range r.ActiveFiles {
		if p == "" || len(p) > MaxPathLen {
			v.add(fmt.Sprintf("activeFiles[%d]", i), "must be 1 to %d bytes", MaxPathLen)
		}
	}
	if r.MaxOutputTokens < 0 || r.MaxOutputTokens > MaxOutputTokensLimit {
		v.add("maxOutputTokens", "must be between 0 and %d", MaxOutputTokensLimit)
	}

	if a := r.AgentContext; a != nil {
		token("agentContext.id", a.Id, false)
		text("agentContext.backend", a.Backend, MaxNameLen)
		text("agentContext.model", a.Model, MaxNameLen)
		text("agentContext.index", a.Index, MaxNameLen)
	}
	if c := r.ConversationContext; c != nil {
		token("conversationContext.id", c.Id, false)
		text("conversationContext.systemPrompt", c.SystemPrompt, MaxSystemPromptBytes)
		text("conversationContext.defaultModel", c.DefaultModel, MaxNameLen)
		if len(c.DefaultTools) > MaxToolsJSONBytes {
			v.add("conversationContext.defaultTools", "is %d bytes, limit %d", len(c.DefaultTools), MaxToolsJSONBytes)
		}
		if len(c.Mode) > MaxModeLen {
			v.add("conversationContext.mode", "must be at most %d characters", MaxModeLen)
		}
	}
	if len(v.Fields) == 0 {
		return nil
	}
	return v
}

func isControl(r rune) bool        { return r < 0x20 || r == 0x7f }
func isSpaceOrControl(r rune) bool { return r <= 0x20 || r == 0x7f }

// clip shortens a bad value for an error message so a 1 MB id does not echo back whole.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}
