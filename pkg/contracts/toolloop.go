package contracts

import (
	"encoding/json"
	"slices"
	"strconv"
)

// StageToolRound is the event of an LLM result whose calls name server-side
// (MCP) tools, for the toolrunner (docs/architecture.md#the-server-side-tool-loop); the toolrunner answers
// with the next round's aptix.enveloped event. It is not in Stages: a turn
// visits it only when its model calls a server-side tool (and once before
// its first call, to discover the tools), between enveloped and responded.
const StageToolRound = "toolround"

// Tool loop statuses (execution_metadata.status).
const (
	LoopRunning          = "in_progress"
	LoopCompleted        = "completed"
	LoopMaxDepthExceeded = "max_depth_exceeded"
	LoopCancelled        = "cancelled"
)

// Tool execution statuses (tool_executions[].status).
const (
	ExecCompleted = "completed"
	ExecFailed    = "failed"
	ExecTimeout   = "timeout"
	ExecCancelled = "cancelled"
	// ExecDenied is a call the client's approval response refused: it did
	// not run, and the model was told so.
	ExecDenied = "denied"
)

// ToolLoop is the server-side tool loop's section of a turn (docs/architecture.md#the-server-side-tool-loop): the
// MCP servers the turn may use, the tools offered to the model, and what
// every round did. It travels with the turn, so the completed event holds
// the loop's whole story and any round can be replayed from its event.
type ToolLoop struct {
	// Servers are the MCP servers the request enabled (OpenAI's mcp tools).
	Servers []MCPServerUse `json:"servers,omitempty"`
	// AllServers offers every configured server (APTIX_MCP_DEFAULT_ALL on a
	// request with no tools at all).
	AllServers bool `json:"allServers,omitempty"`
	// MaxDepth bounds the rounds of server-side calls; MaxCalls (the
	// request's max_tool_calls, 0 for none) bounds the calls.
	MaxDepth int `json:"maxDepth"`
	MaxCalls int `json:"maxCalls,omitempty"`
	// Round counts the rounds of tools run so far: the LLM call the turn is
	// at is the (Round+1)th.
	Round int `json:"round"`
	// Step counts the loop's hops (discovery, each round's tools and its
	// next call): events after the first carry it in their Nats-Msg-Id, so
	// a redelivered hop is stored once and every round is its own event.
	Step int `json:"step"`
	// Tools are the server-side tools offered to the model, by the name it sees.
	Tools []LoopTool `json:"tools,omitempty"`
	// Items are the mcp_list_tools items of discovery (a server that could
	// not list its tools says why there) and the output items of the rounds
	// before the last LLM call, server-side calls already turned into
	// mcp_call items.
	Items []json.RawMessage `json:"items,omitempty"`
	// Executions are the seed's tool_executions, in the order they ran.
	Executions []ToolExecution `json:"executions,omitempty"`
	// Usage sums the LLM calls before the last one (the mapper adds the last).
	Usage LlmUsage `json:"usage"`
	// StartedAtMs is when discovery began (Unix ms), for total_duration_ms.
	StartedAtMs int64 `json:"startedAtMs,omitempty"`
	// DurationMs is the loop's total time, set when it ends.
	DurationMs int64 `json:"durationMs,omitempty"`
	// Status is execution_metadata.status once the loop ends.
	Status string `json:"status,omitempty"`
	// Pending are the function_call_output items of server-side calls in a
	// round that also called the client's functions: the loop ended there,
	// and the conversation's next turn sends them with the client's outputs.
	Pending []json.RawMessage `json:"pending,omitempty"`
	// Approvals are the server-side calls of the last round that wait for
	// the client's approval (require_approval): the loop ended there with
	// an mcp_approval_request item for each, and the conversation's next
	// turn runs or skips each one before its first LLM call.
	Approvals []PendingApproval `json:"approvals,omitempty"`
	// Resume are the decisions this turn brings on the last turn's
	// Approvals (mcp_approval_response items), which the toolrunner acts on
	// when it discovers the turn's tools.
	Resume []ApprovalDecision `json:"resume,omitempty"`
	// Template is the first call's body without input and
	// previous_response_id: each later round is this with the round's
	// function_call_output items, continuing the last upstream response.
	Template json.RawMessage `json:"template,omitempty"`
}

// MCPServerUse is one mcp tool of a request: a configured server by label,
// optionally limited to some of its tools.
type MCPServerUse struct {
	Label string `json:"label"`
	// URL is a client-named server (server_url), allowed only where the
	// deployment says so (APTIX_MCP_ALLOW_URLS): otherwise an SSRF hole.
	URL          string   `json:"url,omitempty"`
	AllowedTools []string `json:"allowedTools,omitempty"`
	// RequireApproval is "never", "always", or "filter": then a tool in
	// ApprovalAlways needs approval, one in ApprovalNever does not, and any
	// other needs it unless the filter names only tools that do
	// (NeedsApproval).
	RequireApproval string   `json:"requireApproval,omitempty"`
	ApprovalAlways  []string `json:"approvalAlways,omitempty"`
	ApprovalNever   []string `json:"approvalNever,omitempty"`
}

// NeedsApproval says whether a call of tool on this server waits for the
// client's approval.
func (u MCPServerUse) NeedsApproval(tool string) bool {
	switch u.RequireApproval {
	case "always":
		return true
	case "filter":
		if slices.Contains(u.ApprovalAlways, tool) {
			return true
		}
		if slices.Contains(u.ApprovalNever, tool) {
			return false
		}
		// An "always" list alone names the exceptions; otherwise, as
		// OpenAI's default, an unnamed tool needs approval.
		return len(u.ApprovalAlways) == 0 || len(u.ApprovalNever) > 0
	}
	return false
}

// PendingApproval is a server-side call waiting for the client's approval:
// the mcp_approval_request item ID, and what is needed to run it later.
type PendingApproval struct {
	ID        string `json:"id"`
	ItemID    string `json:"itemId,omitempty"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Server    string `json:"server"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
}

// ApprovalDecision is the client's answer to one PendingApproval; a
// pending approval the client did not answer is not approved.
type ApprovalDecision struct {
	PendingApproval
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// LoopTool maps the name the model sees to a server's tool.
type LoopTool struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// ToolExecution is one server-side tool call (the response's tool_executions, docs/http-api.md#server-side-mcp-tools).
type ToolExecution struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Server     string          `json:"server"`
	CallID     string          `json:"callId"`
	Round      int             `json:"round"`
	Input      json.RawMessage `json:"input"`
	Output     string          `json:"output"`
	Error      string          `json:"error,omitempty"`
	DurationMs int64           `json:"durationMs"`
	Status     string          `json:"status"`
}

// ServerTool finds the server-side tool the model called by name.
func (l *ToolLoop) ServerTool(name string) (LoopTool, bool) {
	if l == nil {
		return LoopTool{}, false
	}
	for _, t := range l.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return LoopTool{}, false
}

// EventMsgID is the Nats-Msg-Id of a turn's event at a stage: MsgID, with
// the tool loop's step appended once the loop has moved, so each round's
// events are stored and de-duplicated on their own.
func EventMsgID(t *Turn, stage string) string {
	if t.Tools == nil || t.Tools.Step == 0 {
		return MsgID(t.ConversationId, t.TurnId, stage)
	}
	return MsgID(t.ConversationId, t.TurnId, stage) + "." + strconv.Itoa(t.Tools.Step)
}

// CallKey names one LLM call of a turn for pay-once: the turn's key
// (TurnKey) for the first, then "<key>.r<round>" per round of the tool
// loop. The dot keeps a round's key apart from any turn id's.
func CallKey(t *Turn) string {
	key := TurnKey(t.ConversationId, t.TurnId)
	if t.Tools == nil || t.Tools.Round == 0 {
		return key
	}
	return key + ".r" + strconv.Itoa(t.Tools.Round)
}

// ServerCalls counts the function calls in a Responses body's output that
// name one of the loop's server-side tools: the LLM caller sends a result
// with any to the toolrunner instead of the mapper.
func (l *ToolLoop) ServerCalls(body string) int {
	if l == nil || len(l.Tools) == 0 || body == "" {
		return 0
	}
	var r struct {
		Output []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"output"`
	}
	if json.Unmarshal([]byte(body), &r) != nil {
		return 0
	}
	n := 0
	for _, it := range r.Output {
		if _, ok := l.ServerTool(it.Name); ok && it.Type == "function_call" {
			n++
		}
	}
	return n
}
