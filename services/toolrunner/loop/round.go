// Package loop is the server-side tool loop's domain
// (docs/architecture.md#the-server-side-tool-loop), plain Go: which calls of an LLM result are Aptix's to run, the
// OpenAI items that record them (mcp_list_tools, mcp_call), the depth
// limit, and the next round's request body. The toolrunner's stage binds it
// to the bus and to MCP.
package loop

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Call is one function_call item of an LLM result.
type Call struct {
	ItemID    string
	CallID    string
	Name      string
	Arguments string
	// Tool is the server-side tool it names; zero for a client's function.
	Tool contracts.LoopTool
}

// Result is what one LLM call of the loop returned.
type Result struct {
	// ResponseID is the upstream response the next round continues.
	ResponseID string
	// Items are the output items in order.
	Items []json.RawMessage
	// Server are the calls Aptix runs; Client the calls the client runs.
	Server, Client []Call
	Usage          contracts.LlmUsage
}

// Read splits a Responses body's output into the loop's server-side calls
// and the client's function calls.
func Read(body string, l *contracts.ToolLoop) (Result, error) {
	var r struct {
		ID     string                   `json:"id"`
		Output []json.RawMessage        `json:"output"`
		Usage  *contracts.UpstreamUsage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return Result{}, fmt.Errorf("LLM result is not a /responses object: %w", err)
	}
	res := Result{ResponseID: r.ID, Items: r.Output, Usage: r.Usage.LlmUsage()}
	for _, raw := range r.Output {
		var it struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		if json.Unmarshal(raw, &it) != nil || it.Type != "function_call" {
			continue
		}
		c := Call{ItemID: it.ID, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments}
		if t, ok := l.ServerTool(it.Name); ok {
			c.Tool = t
			res.Server = append(res.Server, c)
		} else {
			res.Client = append(res.Client, c)
		}
	}
	return res, nil
}

// DepthError is why a loop may not run another round: the seed's
// execution_error max_depth_exceeded.
type DepthError struct{ Reason string }

func (e *DepthError) Error() string { return e.Reason }

// Code is the error code the client gets.
func (e *DepthError) Code() string { return contracts.LoopMaxDepthExceeded }

// CheckDepth says whether another round of server-side calls may run: at
// most MaxDepth rounds (APTIX_MAX_TOOL_DEPTH).
func CheckDepth(l *contracts.ToolLoop) error {
	if l.Round >= l.MaxDepth {
		return &DepthError{fmt.Sprintf("Tool execution exceeded maximum depth: the model asked for round %d of server-side tool calls and the limit is %d (APTIX_MAX_TOOL_DEPTH)", l.Round+1, l.MaxDepth)}
	}
	return nil
}

// Limit parts calls into those the request's max_tool_calls still allows
// (in the model's order) and those past it, which do not run: the model
// reads that they did not, and the loop's next call is its last
// (Exhausted).
func Limit(l *contracts.ToolLoop, calls []Call) (run, over []Call) {
	if l.MaxCalls <= 0 {
		return calls, nil
	}
	left := max(l.MaxCalls-len(l.Executions), 0)
	if len(calls) <= left {
		return calls, nil
	}
	return calls[:left], calls[left:]
}

// Exhausted says whether the request's max_tool_calls is used up: the next
// LLM call gets tool_choice "none", so the model answers with what it has.
func Exhausted(l *contracts.ToolLoop) bool {
	return l.MaxCalls > 0 && len(l.Executions) >= l.MaxCalls
}

// OverOutput is what the model reads for a call past max_tool_calls.
func OverOutput(l *contracts.ToolLoop) string {
	return fmt.Sprintf("Not run: this response's max_tool_calls (%d) is reached. Answer with the results you have.", l.MaxCalls)
}

// Output is one call's result as the model sees it next round.
type Output struct {
	CallID string
	Output string
}

// Next is the body of the loop's next LLM call: the template (the first
// call's body without its input) continuing the last upstream response,
// with the round's function_call_output items as input. A forced or
// required tool_choice applied to the first call only: repeated, it would
// make the model call a tool every round until the depth limit.
//
// last (max_tool_calls used up) sets tool_choice "none": the model answers.
func Next(template json.RawMessage, previousID string, outs []Output, last bool) (json.RawMessage, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(template, &b); err != nil {
		return nil, fmt.Errorf("loop template: %w", err)
	}
	if tc, ok := b["tool_choice"]; ok && string(tc) != `"auto"` && string(tc) != `"none"` {
		b["tool_choice"] = json.RawMessage(`"auto"`)
	}
	if last {
		b["tool_choice"] = json.RawMessage(`"none"`)
	}
	items := make([]map[string]string, 0, len(outs))
	for _, o := range outs {
		items = append(items, map[string]string{"type": "function_call_output", "call_id": o.CallID, "output": o.Output})
	}
	var err error
	if b["input"], err = marshal(items); err != nil {
		return nil, err
	}
	if b["previous_response_id"], err = marshal(previousID); err != nil {
		return nil, err
	}
	return marshal(b)
}

// Template is a body without its input and previous_response_id: what every
// later round of the loop repeats (model, instructions, tools, parameters).
func Template(body json.RawMessage) (json.RawMessage, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	delete(b, "input")
	delete(b, "previous_response_id")
	return marshal(b)
}

func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
