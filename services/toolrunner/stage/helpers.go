package stage

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/toolrunner/loop"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
)

// liveDelta is a tool loop event on the turn's delta subject, beside the
// LLM caller's text deltas: the gateway turns it into OpenAI's mcp_* events.
type liveDelta struct {
	Type string          `json:"type"`
	Item json.RawMessage `json:"item"`
}

// live publishes a streamed turn's tool loop event (core NATS, a live view:
// the completed event is the record).
func (r *Runner) live(t *contracts.Turn, d liveDelta) {
	if r.NC == nil || !t.Request.Stream {
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	_ = r.NC.PublishMsg(&nats.Msg{Subject: contracts.DeltaSubject(t.ConversationId, t.TurnId), Data: b})
}

// allowed keeps the tools a request's allowed_tools names (nil: all).
func allowed(tools []mcp.Tool, names []string) []mcp.Tool {
	if names == nil {
		return tools
	}
	var out []mcp.Tool
	for _, t := range tools {
		if slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func argsOrEmpty(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

func capped(s string) string {
	if len(s) <= maxOutput {
		return s
	}
	return s[:maxOutput] + fmt.Sprintf("\n[output truncated by Aptix: %d of %d bytes]", maxOutput, len(s))
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// functionNames are the client's function tools in a body: an MCP tool of
// the same name is offered under its prefixed name.
func functionNames(body json.RawMessage) (map[string]bool, error) {
	var b struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, t := range b.Tools {
		if t.Type == "function" {
			names[t.Name] = true
		}
	}
	return names, nil
}

// withTools appends function tools to a body's tools.
func withTools(body json.RawMessage, defs []json.RawMessage) (json.RawMessage, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	var tools []json.RawMessage
	if raw, ok := b["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
	}
	tools = append(tools, defs...)
	if len(tools) == 0 {
		return body, nil
	}
	var err error
	if b["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

// replaceOutput sets a /responses body's output items.
func replaceOutput(body string, items []json.RawMessage) (string, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		return "", fmt.Errorf("LLM result: %w", err)
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	var err error
	if b["output"], err = json.Marshal(items); err != nil {
		return "", err
	}
	out, err := json.Marshal(b)
	return string(out), err
}

// modelOutput is what the model reads as a call's output: the tool's
// output, or what went wrong (the loop continues after an error).
func modelOutput(e contracts.ToolExecution) string {
	if e.Status == contracts.ExecCompleted {
		return e.Output
	}
	return "error: " + firstNonEmpty(e.Error, e.Output, e.Status)
}

// prependInput puts items at the start of a /responses body's input.
func prependInput(body json.RawMessage, items []json.RawMessage) (json.RawMessage, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	var input []json.RawMessage
	if raw, ok := b["input"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &input); err != nil {
			return nil, fmt.Errorf("body input: %w", err)
		}
	}
	var err error
	if b["input"], err = json.Marshal(append(append([]json.RawMessage{}, items...), input...)); err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

// withoutCalls is r without the function_call items of calls (a round's
// calls past max_tool_calls: they do not run and are not shown).
func withoutCalls(r loop.Result, calls []loop.Call) loop.Result {
	drop := map[string]bool{}
	for _, c := range calls {
		drop[c.CallID] = true
	}
	items := make([]json.RawMessage, 0, len(r.Items))
	for _, raw := range r.Items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" && drop[it.CallID] {
			continue
		}
		items = append(items, raw)
	}
	r.Items = items
	server := make([]loop.Call, 0, len(r.Server))
	for _, c := range r.Server {
		if !drop[c.CallID] {
			server = append(server, c)
		}
	}
	r.Server = server
	return r
}
