package loop

import (
	"cmp"
	"encoding/json"
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
// server-side function calls replaced by their mcp_call items, everything
// else (text, reasoning, the client's calls) as the model sent it.
func RoundItems(r Result, execs map[string]contracts.ToolExecution) []json.RawMessage {
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
		if c, ok := byItem[it.CallID]; ok && it.Type == "function_call" {
			out = append(out, CallItem(c, execs[c.CallID]))
			continue
		}
		out = append(out, raw)
	}
	return out
}
