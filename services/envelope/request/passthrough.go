package request

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// governed are the body fields AGN-003 (or the pipeline) decides, so a
// client's passthrough never overrides them: the model and backend are
// chosen by profile, input is merged item by item below, tools and
// tool_choice follow the backend's capabilities, previous_response_id is the
// conversation's, and stream/store/background belong to the LLM caller (it
// needs the upstream to keep responses for continuation and pay-once).
var governed = map[string]bool{
	"model": true, "input": true, "tools": true, "tool_choice": true,
	"previous_response_id": true, "max_output_tokens": true, "instructions": true,
	"stream": true, "stream_options": true, "store": true, "background": true, "conversation": true,
}

// ApplyPassthrough merges what an HTTP gateway client sent beyond the
// AgentExecuteRequest (contracts.OpenAIPassthrough) into a body Build made.
// The client's input items take their place around AGN-003's user message,
// which replaces the message holding the instruction (keeping its non-text
// parts); the system message Build wrote on a first turn stays first. Other
// fields are copied when the body has none of that name. A nil p returns body
// unchanged.
func ApplyPassthrough(body json.RawMessage, p *contracts.OpenAIPassthrough) (json.RawMessage, error) {
	if p == nil {
		return body, nil
	}
	var fields map[string]json.RawMessage
	if err := unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("decode built body: %w", err)
	}
	if len(p.Fields) > 0 {
		var extra map[string]json.RawMessage
		if err := json.Unmarshal(p.Fields, &extra); err != nil {
			return nil, &InvalidRequestError{Field: "openai.fields", Reason: "is not a JSON object: " + err.Error()}
		}
		for k, v := range extra {
			if _, set := fields[k]; !set && !governed[k] {
				fields[k] = v
			}
		}
	}
	if len(p.Input) > 0 {
		input, err := mergeInput(fields["input"], p)
		if err != nil {
			return nil, err
		}
		fields["input"] = input
	}
	return marshal(fields)
}

// mergeInput returns the body's input with the client's items around the
// built user message (the last built item).
func mergeInput(built json.RawMessage, p *contracts.OpenAIPassthrough) (json.RawMessage, error) {
	var ours []json.RawMessage
	if err := unmarshal(built, &ours); err != nil || len(ours) == 0 {
		return nil, fmt.Errorf("built body has no input items")
	}
	var theirs []json.RawMessage
	if err := json.Unmarshal(p.Input, &theirs); err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "is not a JSON array: " + err.Error()}
	}
	idx := p.InstructionItem
	if idx >= len(theirs) || idx < -1 {
		return nil, &InvalidRequestError{Field: "openai.instructionItem", Reason: fmt.Sprintf("%d is outside the %d input items", idx, len(theirs))}
	}
	user := ours[len(ours)-1]
	out := append([]json.RawMessage{}, ours[:len(ours)-1]...)
	if idx == -1 {
		// A round of function_call_output items: no new user message.
		return marshal(append(out, theirs...))
	}
	user, err := withExtraParts(user, theirs[idx])
	if err != nil {
		return nil, err
	}
	out = append(out, theirs[:idx]...)
	out = append(out, user)
	out = append(out, theirs[idx+1:]...)
	return marshal(out)
}

// withExtraParts appends the non-text content parts (input_image,
// input_file, …) of the client's message to the built user message: the text
// is already in the [INSTRUCTION] part.
func withExtraParts(user, client json.RawMessage) (json.RawMessage, error) {
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(client, &msg); err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "instruction item is not a message: " + err.Error()}
	}
	var parts []json.RawMessage
	if json.Unmarshal(msg.Content, &parts) != nil {
		return user, nil // string content: text only
	}
	var extra []json.RawMessage
	for _, part := range parts {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(part, &head) == nil && head.Type != "input_text" && head.Type != "text" && head.Type != "output_text" {
			extra = append(extra, part)
		}
	}
	if len(extra) == 0 {
		return user, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(user, &m); err != nil {
		return nil, fmt.Errorf("decode built user message: %w", err)
	}
	var content []json.RawMessage
	if err := json.Unmarshal(m["content"], &content); err != nil {
		return nil, fmt.Errorf("decode built user content: %w", err)
	}
	c, err := marshal(append(content, extra...))
	if err != nil {
		return nil, err
	}
	m["content"] = c
	return marshal(m)
}
