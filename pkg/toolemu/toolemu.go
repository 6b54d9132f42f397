// Package toolemu emulates function calling for backends that have none
// (profile toolMode "prompt", docs/tool-emulation.md): Instructions writes the
// text that tells the model to answer with <tool_call> blocks, a Parser turns
// those blocks in the model's text back into function calls, whole (Parse) or
// as the text streams in (Stream), and Rewrite applies the parser to a
// /responses body so every later stage sees native function_call items.
//
// Every rule of the seed lives in one file: the injected text in inject.go,
// the example arguments in example.go, the output contract in parse.go. The
// package is plain Go: no bus, no HTTP.
package toolemu

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tool is one function tool as the emulation needs it.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments, as the client wrote it.
	Parameters json.RawMessage
	// Strict tools have their arguments validated against Parameters.
	Strict bool
}

// Tool choice modes. ChoiceForced names one tool in Choice.Name.
const (
	ChoiceAuto     = "auto"
	ChoiceNone     = "none"
	ChoiceRequired = "required"
	ChoiceForced   = "forced"
)

// Choice is the effective tool_choice. The zero value is auto: the seed
// defaults an omitted tool_choice to auto whenever function tools exist.
type Choice struct {
	Mode string
	// Name is the forced tool (ChoiceForced only).
	Name string
}

func (c Choice) mode() string {
	if c.Mode == "" {
		return ChoiceAuto
	}
	return c.Mode
}

// ParseChoice reads a /responses tool_choice: absent or null is auto;
// "auto", "none" and "required" are modes; a function selector in the
// Responses shape ({"type":"function","name":…}) or the Chat Completions
// shape ({"type":"function","function":{"name":…}}) forces that tool.
func ParseChoice(raw json.RawMessage) (Choice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Choice{Mode: ChoiceAuto}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case ChoiceAuto, ChoiceNone, ChoiceRequired:
			return Choice{Mode: mode}, nil
		}
		return Choice{}, fmt.Errorf("tool_choice %q: want auto, none, required or a function selector", mode)
	}
	var sel struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &sel); err != nil {
		return Choice{}, fmt.Errorf("tool_choice: %w", err)
	}
	name := sel.Name
	if name == "" && sel.Function != nil {
		name = sel.Function.Name
	}
	if sel.Type != "function" || name == "" {
		return Choice{}, fmt.Errorf("tool_choice %s: want {\"type\":\"function\",\"name\":…}", raw)
	}
	return Choice{Mode: ChoiceForced, Name: name}, nil
}

// DecodeTools reads the function tools of a JSON array of tool definitions
// in the Responses shape or the Chat Completions shape; other tool types are
// skipped, since only function tools are emulated.
func DecodeTools(raw json.RawMessage) ([]Tool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("tools: want a JSON array: %w", err)
	}
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	}
	var tools []Tool
	for i, item := range items {
		var head struct {
			Type string `json:"type"`
			function
			Function *function `json:"function"` // Chat Completions shape
		}
		if err := json.Unmarshal(item, &head); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if head.Type != "function" {
			continue
		}
		fn := head.function
		if head.Function != nil {
			fn = *head.Function
		}
		if fn.Name == "" {
			return nil, fmt.Errorf("tools[%d]: function tool without a name", i)
		}
		tools = append(tools, Tool{Name: fn.Name, Description: fn.Description, Parameters: fn.Parameters, Strict: fn.Strict})
	}
	return tools, nil
}
