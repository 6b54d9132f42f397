package toolemu

import (
	"bytes"
	"fmt"
	"strings"
)

// baseInstructions is the seed's base block, injected verbatim whenever
// function tools exist.
const baseInstructions = `Tool calling instructions:
Only emit tool calls using <tool_call>...</tool_call>.
Format: <tool_call>{"name":"TOOL_NAME","arguments":"{...}"}</tool_call>
Inside <tool_call>...</tool_call>, output ONLY a JSON object with keys "name" and "arguments".
Always emit <tool_call> blocks exactly as shown; the client executes them.
Do NOT call internal tools directly (shell, apply_patch, web_search, view_image); only emit <tool_call>.
Read-only sandbox or approval restrictions do NOT prevent emitting <tool_call> output.
Use EXACT parameter names from the schema; do NOT invent or rename keys.
Do not add any extra characters before or after the JSON (no trailing ">", no code fences).
Use exactly one opening <tool_call> and one closing </tool_call> tag.
Output must be valid JSON. Do not add extra braces or trailing characters.
Do NOT wrap the JSON object in an array (no leading "[" or trailing "]").
Bad: <tool_call>[{"name":"tool","arguments":"{...}"}]</tool_call>
Never repeat the closing tag.
Example (exact): <tool_call>{"name":"webSearch","arguments":"{\"query\":\"example\",\"chatHistory\":[]}"}</tool_call>
The "arguments" field must be a JSON string.
If a tool has no parameters, use arguments "{}".
If no tool is needed, respond with plain text.`

// The scenario lines and headings of the seed, verbatim.
const (
	choiceNoneLine     = "Tool choice is none: never emit <tool_call>."
	choiceRequiredLine = "Tool choice is required: you MUST emit at least one <tool_call>."
	choiceForcedFormat = "Tool choice is forced: you MUST call \"%s\"."
	strictFormat       = "Strict tools: %s. Arguments MUST conform exactly to schema."
	manifestHeading    = "Available tools (schema):"
	guidanceHeading    = "Per-tool guidance and examples (schema-conformant):"
	noParameters       = "- (no parameters)"
)

// Instructions returns the tool-call instructions the seed injects for a
// request's function tools, or "" when there are none. The lines, in order:
// the base block; the tool-choice line (none, required or forced; auto,
// the default, adds none); the strict line when any tool is strict; the
// manifest, one `- name: <schema JSON>` per tool; then per tool its
// description, parameters and a schema-derived example call. Lines are
// joined by single newlines, with no blank lines, as in the seed's example.
func Instructions(tools []Tool, choice Choice) (string, error) {
	if len(tools) == 0 {
		return "", nil
	}
	schemas := make([]value, len(tools))
	for i, t := range tools {
		s, err := parameters(t)
		if err != nil {
			return "", err
		}
		schemas[i] = s
	}

	lines := []string{baseInstructions}
	switch choice.mode() {
	case ChoiceNone:
		lines = append(lines, choiceNoneLine)
	case ChoiceRequired:
		lines = append(lines, choiceRequiredLine)
	case ChoiceForced:
		lines = append(lines, fmt.Sprintf(choiceForcedFormat, choice.Name))
	}
	var strict []string
	for _, t := range tools {
		if t.Strict {
			strict = append(strict, t.Name)
		}
	}
	if len(strict) > 0 {
		lines = append(lines, fmt.Sprintf(strictFormat, strings.Join(strict, ", ")))
	}

	lines = append(lines, manifestHeading)
	for i, t := range tools {
		lines = append(lines, "- "+t.Name+": "+stringify(schemas[i]))
	}

	lines = append(lines, guidanceHeading)
	for i, t := range tools {
		lines = append(lines, "Tool: "+t.Name)
		if t.Description != "" {
			lines = append(lines, "Description: "+t.Description)
		}
		lines = append(lines, "Parameters:")
		lines = append(lines, parameterLines(schemas[i])...)
		lines = append(lines, "Example tool_call:", exampleCall(t.Name, schemas[i]))
	}
	return strings.Join(lines, "\n"), nil
}

// parameters decodes a tool's schema; a tool without one takes no arguments.
func parameters(t Tool) (value, error) {
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return value{kind: kindObject, obj: []member{{"type", stringValue("object")}, {"properties", value{kind: kindObject}}}}, nil
	}
	s, err := parseValue(t.Parameters)
	if err != nil {
		return value{}, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
	}
	return s, nil
}

// parameterLines lists the schema's top-level properties:
// `- name (required|optional, type): description`, the description part
// left out when the property has none.
func parameterLines(schema value) []string {
	props, _ := schema.get("properties")
	if len(props.obj) == 0 {
		return []string{noParameters}
	}
	required := requiredNames(schema)
	lines := make([]string, 0, len(props.obj))
	for _, p := range props.obj {
		need := "optional"
		for _, r := range required {
			if r == p.key {
				need = "required"
			}
		}
		line := fmt.Sprintf("- %s (%s, %s)", p.key, need, typeLabel(p.val))
		if d, ok := p.val.get("description"); ok && d.kind == kindString && d.str != "" {
			line += ": " + d.str
		}
		lines = append(lines, line)
	}
	return lines
}

// typeLabel names a property's type: its "type" (a list joined with "|"),
// else the types of its anyOf/oneOf branches, else what its keywords imply,
// else "any".
func typeLabel(s value) string {
	t, _ := s.get("type")
	switch t.kind {
	case kindString:
		return t.str
	case kindArray:
		var names []string
		for _, e := range t.arr {
			if e.kind == kindString {
				names = append(names, e.str)
			}
		}
		if len(names) > 0 {
			return strings.Join(names, "|")
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s.get(k); ok && alts.kind == kindArray {
			var names []string
			for _, a := range alts.arr {
				names = append(names, typeLabel(a))
			}
			if len(names) > 0 {
				return strings.Join(names, "|")
			}
		}
	}
	if t := schemaType(s); t != "" {
		return t
	}
	return "any"
}

// exampleCall is the example <tool_call> line: the arguments are the
// JSON.stringify of the example object, carried as a JSON string, exactly
// as the base block asks the model to write them.
func exampleCall(name string, schema value) string {
	args := stringify(exampleArguments(schema))
	return "<tool_call>{\"name\":" + jsString(name) + ",\"arguments\":" + jsString(args) + "}</tool_call>"
}
