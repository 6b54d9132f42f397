// Package tooldef reads the tools of a request the way every Aptix part
// must agree on: the envelope that sends them upstream and every front door
// that echoes them or checks a tool_choice against them. One parse, so a
// tool list the gateway accepts is never one the envelope refuses.
package tooldef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Error codes a rejected turn carries to the client
// (AgentExecuteResponse.ErrorCode), whichever part found the fault.
const (
	CodeInvalidTools      = "invalid_tools"
	CodeUnknownToolChoice = "unknown_tool_choice"
)

// Tool is one entry of a /responses request's tools array, normalized. A
// function tool is always the flat Responses shape with strict set
// explicitly; any other tool type (web_search, file_search, mcp, …) passes
// through untouched in Raw.
type Tool struct {
	Type        string
	Name        string
	Description string
	Parameters  json.RawMessage
	Strict      bool
	// Raw is the verbatim definition of a non-function tool.
	Raw json.RawMessage
}

// IsFunction reports whether t is a function tool (the only kind tool_choice
// can force by name).
func (t Tool) IsFunction() bool { return t.Type == "function" }

// Key names a tool for merging: function tools by name, others by their
// verbatim definition (two identical web_search tools are one tool).
func (t Tool) Key() string {
	if t.IsFunction() {
		return "function:" + t.Name
	}
	return "raw:" + string(t.Raw)
}

// functionWire is the flat Responses function tool, fields in the order
// OpenAI documents them.
type functionWire struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// MarshalJSON writes the Responses wire shape.
func (t Tool) MarshalJSON() ([]byte, error) {
	if !t.IsFunction() {
		return t.Raw, nil
	}
	return marshal(functionWire{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
}

// UnmarshalJSON reads one tool in the Responses shape or the Chat Completions
// shape ({"type":"function","function":{…}}) and normalizes it.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var head struct {
		Type     string          `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := unmarshal(data, &head); err != nil {
		return fmt.Errorf("not a tool object: %w", stdError(data, &head, err))
	}
	if head.Type == "" {
		return fmt.Errorf("tool has no \"type\"")
	}
	if head.Type != "function" {
		*t = Tool{Type: head.Type, Raw: compact(data)}
		return nil
	}
	body := data
	if len(head.Function) > 0 && !bytes.Equal(head.Function, []byte("null")) {
		body = head.Function // Chat Completions shape
	}
	var fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if err := unmarshal(body, &fn); err != nil {
		return fmt.Errorf("function tool: %w", stdError(body, &fn, err))
	}
	if !toolName.MatchString(fn.Name) {
		return fmt.Errorf("function tool name %q must match %s", fn.Name, toolName)
	}
	params := compact(fn.Parameters)
	switch {
	case len(params) == 0 || string(params) == "null":
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	case params[0] != '{':
		return fmt.Errorf("function tool %q: parameters must be a JSON Schema object", fn.Name)
	}
	// OpenAI treats an absent strict as true, which rejects most hand-written
	// schemas; Aptix makes the default explicit and false.
	*t = Tool{Type: "function", Name: fn.Name, Description: fn.Description, Parameters: params, Strict: fn.Strict != nil && *fn.Strict}
	return nil
}

// toolName is OpenAI's rule for function names.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Parse reads a JSON array of tools in either shape. An empty string is
// no tools. Duplicate function names in one list are an error: which one the
// client meant is unknowable.
func Parse(field, raw string) ([]Tool, error) {
	if raw == "" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := unmarshal([]byte(raw), &items); err != nil {
		return nil, &InvalidError{Field: field, Index: -1, Err: fmt.Errorf("want a JSON array of tool definitions: %w", stdError([]byte(raw), &items, err))}
	}
	return ParseItems(field, items)
}

// ParseItems is Parse for an array already split into its items
// (the gateway's create parse has them): the same tools, or the same error.
func ParseItems(field string, items []json.RawMessage) ([]Tool, error) {
	tools := make([]Tool, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		var t Tool
		if err := t.UnmarshalJSON(item); err != nil {
			return nil, &InvalidError{Field: field, Index: i, Err: err}
		}
		if seen[t.Key()] {
			return nil, &InvalidError{Field: field, Index: i, Err: fmt.Errorf("tool %q defined twice", t.Name)}
		}
		seen[t.Key()] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// Merge puts the request's tools first and adds each default tool the
// request does not redefine: on a name clash the request's definition wins.
func Merge(request, defaults []Tool) []Tool {
	if len(defaults) == 0 {
		return request
	}
	out := slices.Clone(request)
	have := map[string]bool{}
	for _, t := range request {
		have[t.Key()] = true
	}
	for _, t := range defaults {
		if !have[t.Key()] {
			out = append(out, t)
			have[t.Key()] = true
		}
	}
	return out
}

// Same reports whether two tool lists are the same set with the same
// definitions (order-insensitive), i.e. whether a backend that retains tools
// already holds these.
func Same(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	defs := map[string]string{}
	for _, t := range a {
		j, _ := t.MarshalJSON()
		defs[t.Key()] = string(j)
	}
	for _, t := range b {
		j, _ := t.MarshalJSON()
		if d, ok := defs[t.Key()]; !ok || d != string(j) {
			return false
		}
	}
	return true
}

// FunctionNames lists the function tools' names, for error messages.
func FunctionNames(tools []Tool) []string {
	var names []string
	for _, t := range tools {
		if t.IsFunction() {
			names = append(names, t.Name)
		}
	}
	return names
}

func compact(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// InvalidError: a tools array (a request's, or a context's defaults) is
// not a JSON array of valid tool definitions.
type InvalidError struct {
	Field string
	// Index of the bad tool, or -1 when the array itself is bad.
	Index int
	Err   error
}

func (e *InvalidError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s[%d]: %v", e.Field, e.Index, e.Err)
}
func (e *InvalidError) Unwrap() error { return e.Err }

// Code is the error code for the client.
func (e *InvalidError) Code() string { return CodeInvalidTools }

// UnknownChoiceError: a tool_choice names no function tool of the turn.
type UnknownChoiceError struct {
	Name  string
	Known []string
}

func (e *UnknownChoiceError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("toolChoiceName %q names no function tool of this turn (tools: %s; or use auto, none, required)", e.Name, known)
}

// Code is the error code for the client.
func (e *UnknownChoiceError) Code() string { return CodeUnknownToolChoice }

// The codec of every body Aptix writes (the envelope's, pkg/pipeline's turn
// codec): encoding/json's semantics through the v2 engine, no HTML escaping.
var (
	v1NoHTMLEscape = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false))
)

func marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, v1NoHTMLEscape) }

func unmarshal(data []byte, v any) error { return jsonv2.Unmarshal(data, v, jsonv1.DefaultOptionsV1()) }

// stdError is encoding/json's error for data, the one a client was always
// told, where the faster decoder failed with err.
func stdError(data []byte, v any, err error) error {
	if e := json.Unmarshal(data, v); e != nil {
		return e
	}
	return err
}
