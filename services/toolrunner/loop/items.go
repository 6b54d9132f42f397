package loop

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ListedTool is one tool a server lists, as mcp_list_tools shows it.
type ListedTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Annotations json.RawMessage `json:"annotations"`
}

// ListItem is OpenAI's mcp_list_tools output item: a server's tools, or
// the error that kept Aptix from listing them (a server that is down is
// reported, not fatal).
func ListItem(id, server string, tools []ListedTool, errMsg string) json.RawMessage {
	item := map[string]any{"id": id, "type": "mcp_list_tools", "server_label": server, "tools": tools}
	if tools == nil {
		item["tools"] = []ListedTool{}
	}
	if errMsg != "" {
		item["error"] = errMsg
	}
	b, _ := marshal(item)
	return b
}

// CallItem is OpenAI's mcp_call output item for one server-side call: its
// arguments, and its output or its error once it ran (an execution with no
// status is a call still running: status in_progress).
func CallItem(c Call, e contracts.ToolExecution) json.RawMessage {
	item := map[string]any{"id": CallItemID(c), "type": "mcp_call", "server_label": c.Tool.Server, "name": c.Tool.Tool,
		"arguments": c.Arguments, "output": nil, "error": nil, "approval_request_id": nil, "status": "completed"}
	switch e.Status {
	case "":
		item["status"] = "in_progress"
	case contracts.ExecCompleted:
		item["output"] = e.Output
	case contracts.ExecFailed:
		if e.Output != "" {
			// The tool answered with an error result (isError): OpenAI's
			// mcp_tool_execution_error carries its content.
			item["status"], item["output"] = "failed", e.Output
			item["error"] = map[string]any{"type": "mcp_tool_execution_error",
				"content": []map[string]string{{"type": "text", "text": e.Output}}}
			break
		}
		fallthrough
	default:
		// No answer: the server failed, the call timed out or was cancelled.
		code := -32603 // JSON-RPC internal error
		if e.Status == contracts.ExecTimeout {
			code = -32001 // the MCP SDKs' request timeout
		}
		item["status"] = "failed"
		item["error"] = map[string]any{"type": "mcp_protocol_error", "code": code, "message": cmp.Or(e.Error, e.Status)}
	}
	b, _ := marshal(item)
	return b
}

// CallItemID is the mcp_call item's id: the model's function_call item id
// with OpenAI's mcp_ prefix, so the live stream and the stored output agree.
func CallItemID(c Call) string {
	id := c.ItemID
	if id == "" {
		id = c.CallID
	}
	for _, p := range []string{"fc_", "call_"} {
		id = strings.TrimPrefix(id, p)
	}
	return "mcp_" + id
}

// RoundItems are a round's output items as the response shows them: the
// server-side function calls replaced by their mcp_call items (or, for
// those in asked, their mcp_approval_request items), everything else
// (text, reasoning, the client's calls) as the model sent it.
func RoundItems(r Result, execs map[string]contracts.ToolExecution, asked map[string]contracts.PendingApproval) []json.RawMessage {
	byItem := map[string]Call{}
	for _, c := range r.Server {
		byItem[c.CallID] = c
	}
	out := make([]json.RawMessage, 0, len(r.Items))
	for _, raw := range r.Items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(raw, &it)
		if p, ok := asked[it.CallID]; ok && it.Type == "function_call" {
			out = append(out, ApprovalItem(p))
			continue
		}
		if c, ok := byItem[it.CallID]; ok && it.Type == "function_call" {
			out = append(out, CallItem(c, execs[c.CallID]))
			continue
		}
		out = append(out, raw)
	}
	return out
}

// ApprovalID is the mcp_approval_request item's id for a call: the model's
// function_call item id with the mcpr_ prefix, stable across redeliveries.
func ApprovalID(c Call) string {
	return "mcpr_" + strings.TrimPrefix(CallItemID(c), "mcp_")
}

// Pending is the call as it waits for the client's approval.
func Pending(c Call) contracts.PendingApproval {
	return contracts.PendingApproval{ID: ApprovalID(c), ItemID: c.ItemID, CallID: c.CallID, Name: c.Name,
		Server: c.Tool.Server, Tool: c.Tool.Tool, Arguments: c.Arguments}
}

// Resumed is a call the last turn left for approval, as a Call to run.
func Resumed(p contracts.PendingApproval) Call {
	return Call{ItemID: p.ItemID, CallID: p.CallID, Name: p.Name, Arguments: p.Arguments,
		Tool: contracts.LoopTool{Name: p.Name, Server: p.Server, Tool: p.Tool}}
}

// ApprovalItem is OpenAI's mcp_approval_request output item: the call
// Aptix runs once the client approves it.
func ApprovalItem(p contracts.PendingApproval) json.RawMessage {
	b, _ := marshal(map[string]any{"id": p.ID, "type": "mcp_approval_request", "server_label": p.Server,
		"name": p.Tool, "arguments": p.Arguments})
	return b
}

// ApprovedCallItem is the mcp_call item of a call that ran on the client's
// approval: it names the approval request.
func ApprovedCallItem(c Call, e contracts.ToolExecution, approvalID string) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(CallItem(c, e), &m)
	m["approval_request_id"] = approvalID
	b, _ := marshal(m)
	return b
}

// DeniedOutput is what the model reads as the output of a call the client
// did not approve: it did not run.
func DeniedOutput(d contracts.ApprovalDecision) string {
	s := fmt.Sprintf("The user denied this call of tool %s on MCP server %s: it did not run.", d.Tool, d.Server)
	if d.Reason != "" {
		s += " Reason: " + d.Reason
	}
	return s
}

// Split parts a round's server-side calls into those Aptix runs now and
// those that wait for the client's approval (each server's
// require_approval, contracts.MCPServerUse.NeedsApproval).
func Split(l *contracts.ToolLoop, calls []Call) (run, ask []Call) {
	for _, c := range calls {
		needs := false
		for _, u := range l.Servers {
			if u.Label == c.Tool.Server {
				needs = u.NeedsApproval(c.Tool.Tool)
			}
		}
		if needs {
			ask = append(ask, c)
		} else {
			run = append(run, c)
		}
	}
	return run, ask
}
