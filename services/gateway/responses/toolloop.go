package responses

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ToolExecution is one server-side tool call, as the response's tool_executions shows it (docs/http-api.md#server-side-mcp-tools).
type ToolExecution struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Server     string          `json:"server_label"`
	CallID     string          `json:"call_id"`
	Round      int             `json:"round"`
	Input      json.RawMessage `json:"input"`
	Output     string          `json:"output"`
	Error      string          `json:"error,omitempty"`
	DurationMs int64           `json:"duration_ms"`
	Status     string          `json:"status"`
}

// ExecutionMetadata is the response's summary of a tool loop.
type ExecutionMetadata struct {
	MaxDepth        int    `json:"max_depth"`
	ActualDepth     int    `json:"actual_depth"`
	TotalDurationMs int64  `json:"total_duration_ms"`
	Status          string `json:"status"`
}

// withToolLoop adds a turn's server-side tool loop to its response: the
// mcp_list_tools and mcp_call items before the last call's output, the
// seed's tool_executions and execution_metadata, and, when r's usage is
// the last call's (addUsage), the usage of every round (the seed's
// reference implementation reports the last call's only). It returns the
// loop's items, which a failed response keeps.
func withToolLoop(r *Response, t *contracts.Turn, addUsage bool) []json.RawMessage {
	l := t.Tools
	if l == nil {
		return []json.RawMessage{}
	}
	items := append([]json.RawMessage{}, l.Items...)
	r.Output = append(append([]json.RawMessage{}, items...), r.Output...)
	r.ToolExecutions = []ToolExecution{}
	for _, e := range l.Executions {
		r.ToolExecutions = append(r.ToolExecutions, ToolExecution{ID: e.ID, Tool: e.Tool, Server: e.Server, CallID: e.CallID,
			Round: e.Round, Input: e.Input, Output: e.Output, Error: e.Error, DurationMs: e.DurationMs, Status: e.Status})
	}
	status := l.Status
	if status == "" {
		status = contracts.LoopRunning
		if t.Failure != nil {
			status = t.Failure.Code
		}
	}
	r.ExecutionMetadata = &ExecutionMetadata{MaxDepth: l.MaxDepth, ActualDepth: l.Round, TotalDurationMs: l.DurationMs, Status: status}
	if !addUsage {
		return items
	}
	if r.Usage != nil {
		r.Usage.InputTokens += l.Usage.PromptTokens
		r.Usage.OutputTokens += l.Usage.CompletionTokens
		r.Usage.TotalTokens += l.Usage.TotalTokens
	} else if l.Usage.TotalTokens > 0 {
		r.Usage = &Usage{InputTokens: l.Usage.PromptTokens, OutputTokens: l.Usage.CompletionTokens, TotalTokens: l.Usage.TotalTokens}
	}
	return items
}
