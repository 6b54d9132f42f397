package request

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/toolemu"
)

// Emulation is a turn's prompt-mode tool calling (profile toolMode
// "prompt", docs/tool-emulation.md): what the LLM caller needs to parse the
// model's <tool_call> blocks back into function calls.
type Emulation struct {
	// Tools are the function tools described in the instructions instead of sent.
	Tools []tooldef.Tool
	// ToolChoice is the turn's tool_choice as resolved for a native backend
	// (nil: auto); the parser follows it.
	ToolChoice json.RawMessage
}

// emulate applies docs/tool-emulation.md to a body built for native tools: function tools
// leave body.Tools (tools other than functions pass through and inject
// nothing), and the injection text becomes the body's instructions.
//
// The seed orders its developer instructions: injection block, top-level
// instructions, then input items with role system or developer. On the
// Responses wire the top-level "instructions" field is exactly that first
// slot: servers put it ahead of every input item, so the injection precedes
// the boot prompt, which stays the system message of turn 1 (AGN-003).
// Aptix sends no instructions of its own, so the field holds the injection
// alone. It is also the right lifetime: previous_response_id does not carry
// instructions forward, so the injection is re-sent with every turn, as the
// function tools would be.
//
// tool_choice "required" or a forced function concern tools the backend no
// longer sees, so they are dropped from the body and expressed by the
// injection's tool-choice line; "auto" and "none" stay only while other
// tools remain for them to govern.
func emulate(body *Body, tools []tooldef.Tool) (*Emulation, error) {
	var fns []tooldef.Tool
	var emu []toolemu.Tool
	var others []tooldef.Tool
	for _, t := range tools {
		if !t.IsFunction() {
			others = append(others, t)
			continue
		}
		fns = append(fns, t)
		emu = append(emu, toolemu.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
	}
	if body.Tools != nil {
		body.Tools = others
	}
	if len(fns) == 0 {
		return nil, nil
	}
	choice, err := toolemu.ParseChoice(body.ToolChoice)
	if err != nil {
		return nil, fmt.Errorf("tool emulation: %w", err)
	}
	// A strict schema that does not compile would fail every call's parse:
	// reject it now, as OpenAI rejects an invalid strict schema.
	if _, err := toolemu.NewParser(emu, choice); err != nil {
		return nil, &tooldef.InvalidError{Field: "tools", Index: -1, Err: err}
	}
	text, err := toolemu.Instructions(emu, choice)
	if err != nil {
		return nil, &tooldef.InvalidError{Field: "tools", Index: -1, Err: err}
	}
	body.Instructions = joinInstructions(body.Instructions, text)
	res := &Emulation{Tools: fns, ToolChoice: body.ToolChoice}
	if choice.Mode == toolemu.ChoiceRequired || choice.Mode == toolemu.ChoiceForced || len(others) == 0 {
		body.ToolChoice = nil
	}
	return res, nil
}
