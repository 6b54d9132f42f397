package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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

// key names a tool for merging: function tools by name, others by their
// verbatim definition (two identical web_search tools are one tool).
func (t Tool) key() string {
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

// ParseTools reads a JSON array of tools in either shape. An empty string is
// no tools. Duplicate function names in one list are an error: which one the
// client meant is unknowable.
func ParseTools(field, raw string) ([]Tool, error) {
	if raw == "" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := unmarshal([]byte(raw), &items); err != nil {
		return nil, &InvalidToolsError{Field: field, Index: -1, Err: fmt.Errorf("want a JSON array of tool definitions: %w", stdError([]byte(raw), &items, err))}
	}
	return ParseToolItems(field, items)
}

// ParseToolItems is ParseTools for an array already split into its items
// (the gateway's create parse has them): the same tools, or the same error.
func ParseToolItems(field string, items []json.RawMessage) ([]Tool, error) {
	tools := make([]Tool, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		var t Tool
		if err := t.UnmarshalJSON(item); err != nil {
			return nil, &InvalidToolsError{Field: field, Index: i, Err: err}
		}
		if seen[t.key()] {
			return nil, &InvalidToolsError{Field: field, Index: i, Err: fmt.Errorf("tool %q defined twice", t.Name)}
		}
		seen[t.key()] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// MergeTools puts the request's tools first and adds each default tool the
// request does not redefine: on a name clash the request's definition wins.
func MergeTools(request, defaults []Tool) []Tool {
	if len(defaults) == 0 {
		return request
	}
	out := slices.Clone(request)
	have := map[string]bool{}
	for _, t := range request {
		have[t.key()] = true
	}
	for _, t := range defaults {
		if !have[t.key()] {
			out = append(out, t)
			have[t.key()] = true
		}
	}
	return out
}

// SameTools reports whether two tool lists are the same set with the same
// definitions (order-insensitive), i.e. whether a backend that retains tools
// already holds these.
func SameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	defs := map[string]string{}
	for _, t := range a {
		j, _ := t.MarshalJSON()
		defs[t.key()] = string(j)
	}
	for _, t := range b {
		j, _ := t.MarshalJSON()
		if d, ok := defs[t.key()]; !ok || d != string(j) {
			return false
		}
	}
	return true
}

// functionNames lists the function tools' names, for error messages.
func functionNames(tools []Tool) []string {
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
