package responsesbody

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// CodeInvalidRequest is the error code a turn whose body cannot be built
// carries to the client (AgentExecuteResponse.ErrorCode); the tool errors'
// codes are tooldef's.
const CodeInvalidRequest = "invalid_request"

// InvalidRequestError: a field the builder needs is missing or unusable.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string { return e.Field + " " + e.Reason }

// Code is the error code for the client.
func (e *InvalidRequestError) Code() string { return CodeInvalidRequest }

// governed are the body fields AGN-003 (or the pipeline) decides, so a
// client's passthrough never overrides them: the model and backend are
// chosen by profile, input is merged item by item, tools and tool_choice
// follow the backend's capabilities, previous_response_id is the
// conversation's, and stream/store/background belong to the LLM caller (it
// needs the upstream to keep responses for continuation and pay-once).
var governed = map[string]bool{
	"model": true, "input": true, "tools": true, "tool_choice": true,
	"previous_response_id": true, "max_output_tokens": true, "instructions": true,
	"stream": true, "stream_options": true, "store": true, "background": true, "conversation": true,
}

// ClientFields are p's fields the rules do not govern, in name order.
func ClientFields(p *contracts.OpenAIPassthrough) ([]Field, error) {
	if p == nil || len(p.Fields) == 0 {
		return nil, nil
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(p.Fields, &extra); err != nil {
		return nil, &InvalidRequestError{Field: "openai.fields", Reason: "is not a JSON object: " + err.Error()}
	}
	fields := make([]Field, 0, len(extra))
	for k, v := range extra {
		if !governed[k] {
			fields = append(fields, Field{Name: k, Value: v})
		}
	}
	slices.SortFunc(fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	return fields, nil
}

// The transparent rule (Framing none, docs/request.md#which-rule-applies-when):
// a client of an OpenAI-compatible API talks to the model, not to AGN-003.
// Its input items go upstream in its order and bytes, its instructions are
// this request's instructions (never a system message, never carried to
// the next turn: Start), and Aptix adds only what the client asked for: a
// context block when it asked for retrieval, appended to the message the
// question came from as one more text part.

// MergeVerbatim makes p's fields the body's and p's input its input, as
// sent, with contextBlock (when not empty) appended to the question's
// message.
func (b *Body) MergeVerbatim(p *contracts.OpenAIPassthrough, contextBlock string) error {
	var err error
	if b.Fields, err = ClientFields(p); err != nil {
		return err
	}
	if p == nil || len(p.Input) == 0 {
		return &InvalidRequestError{Field: "openai.input", Reason: "is empty: a turn without AGN-003 framing sends the client's input items"}
	}
	var theirs []json.RawMessage
	if err := Unmarshal(p.Input, &theirs); err != nil {
		return &InvalidRequestError{Field: "openai.input", Reason: "is not a JSON array: " + StdError(p.Input, &theirs, err).Error()}
	}
	if idx := p.InstructionItem; idx >= len(theirs) || idx < -1 {
		return &InvalidRequestError{Field: "openai.instructionItem", Reason: fmt.Sprintf("%d is outside the %d input items", idx, len(theirs))}
	}
	if contextBlock != "" && p.InstructionItem >= 0 {
		idx := p.InstructionItem
		with, err := withText(theirs[idx], contextBlock)
		if err != nil {
			return err
		}
		theirs = append(append(append(make([]json.RawMessage, 0, len(theirs)), theirs[:idx]...), with), theirs[idx+1:]...)
	}
	for _, raw := range theirs {
		b.Input = append(b.Input, Item{Raw: raw})
	}
	return nil
}

// withText appends one input_text part to a client's message.
func withText(msg json.RawMessage, text string) (json.RawMessage, error) {
	part, err := Marshal(inputText{Type: "input_text", Text: text})
	if err != nil {
		return nil, err
	}
	out, err := WithParts(msg, []json.RawMessage{part})
	if err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "instruction item: " + err.Error()}
	}
	return out, nil
}

type inputText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// WithParts appends parts to an encoded message's content; a string
// content becomes its one input_text part first. Every other member of
// the message stays as it was.
func WithParts(user json.RawMessage, parts []json.RawMessage) (json.RawMessage, error) {
	if len(parts) == 0 {
		return user, nil
	}
	var m map[string]json.RawMessage
	if err := Unmarshal(user, &m); err != nil {
		return nil, fmt.Errorf("decode the message: %w", err)
	}
	var content []json.RawMessage
	var text string
	if Unmarshal(m["content"], &text) == nil {
		part, err := Marshal(inputText{Type: "input_text", Text: text})
		if err != nil {
			return nil, err
		}
		content = []json.RawMessage{part}
	} else if err := Unmarshal(m["content"], &content); err != nil {
		return nil, fmt.Errorf("the message's content is neither a string nor a list of parts: %w", err)
	}
	c, err := Marshal(append(content, parts...))
	if err != nil {
		return nil, err
	}
	m["content"] = c
	return Marshal(m)
}
