package request

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/responsesbody"
)

// The passthrough rules: what an HTTP gateway client sent beyond the
// AgentExecuteRequest (contracts.OpenAIPassthrough) goes into the body.
// The client's input items take their place around AGN-003's user message,
// which replaces the message holding the instruction (keeping its non-text
// parts); the system message Build wrote on a first turn stays first. Other
// fields are copied unless the rules govern them.

// clientFields are p's fields the rules do not govern, in name order.
var clientFields = responsesbody.ClientFields

// clientItems is where p's input items go around the built user message.
type clientItems struct {
	before, after []json.RawMessage
	// parts are the non-text content parts (input_image, input_file, …) of
	// the client's message, appended to the built user message: the text
	// is already in the [INSTRUCTION] part.
	parts []json.RawMessage
	// noUser: a round of function_call_output items, no new user message;
	// before holds every item.
	noUser bool
}

// clientInput splits p's input at its instruction item; nil when p sends none.
func clientInput(p *contracts.OpenAIPassthrough) (*clientItems, error) {
	if p == nil || len(p.Input) == 0 {
		return nil, nil
	}
	var theirs []json.RawMessage
	if err := unmarshal(p.Input, &theirs); err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "is not a JSON array: " + stdError(p.Input, &theirs, err).Error()}
	}
	idx := p.InstructionItem
	if idx >= len(theirs) || idx < -1 {
		return nil, &InvalidRequestError{Field: "openai.instructionItem", Reason: fmt.Sprintf("%d is outside the %d input items", idx, len(theirs))}
	}
	if idx == -1 {
		return &clientItems{before: theirs, noUser: true}, nil
	}
	parts, err := extraParts(theirs[idx])
	if err != nil {
		return nil, err
	}
	return &clientItems{before: theirs[:idx], after: theirs[idx+1:], parts: parts}, nil
}

// extraParts are the parts of the client's message that are not text.
func extraParts(client json.RawMessage) ([]json.RawMessage, error) {
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	if err := unmarshal(client, &msg); err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "instruction item is not a message: " + stdError(client, &msg, err).Error()}
	}
	var parts []json.RawMessage
	if unmarshal(msg.Content, &parts) != nil {
		return nil, nil // string content: text only
	}
	var extra []json.RawMessage
	for _, part := range parts {
		var head struct {
			Type string `json:"type"`
		}
		if unmarshal(part, &head) == nil && head.Type != "input_text" && head.Type != "text" && head.Type != "output_text" {
			extra = append(extra, part)
		}
	}
	return extra, nil
}

// mergeClient applies the passthrough rules to a body Build made: its
// input ends with the built user message.
func mergeClient(b *Body, p *contracts.OpenAIPassthrough) error {
	var err error
	if b.Fields, err = clientFields(p); err != nil {
		return err
	}
	ci, err := clientInput(p)
	if ci == nil || err != nil {
		return err
	}
	n := len(b.Input)
	user := b.Input[n-1]
	out := make([]Item, 0, n+len(ci.before)+len(ci.after))
	out = append(out, b.Input[:n-1]...)
	for _, raw := range ci.before {
		out = append(out, Item{Raw: raw})
	}
	if !ci.noUser {
		for _, part := range ci.parts {
			user.Message.Content = append(user.Message.Content, Part{Raw: part})
		}
		out = append(out, user)
		for _, raw := range ci.after {
			out = append(out, Item{Raw: raw})
		}
	}
	b.Input = out
	return nil
}

// field is the value of the client's field name, nil when it sent none.
func field(b *Body, name string) json.RawMessage {
	for _, f := range b.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// ApplyPassthrough applies the passthrough rules to an encoded body (Build
// applies them to the body it builds, before encoding it): the body's last
// input item is taken for the built user message. A nil p returns body
// unchanged.
func ApplyPassthrough(body json.RawMessage, p *contracts.OpenAIPassthrough) (json.RawMessage, error) {
	if p == nil {
		return body, nil
	}
	var fields map[string]json.RawMessage
	if err := unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("decode built body: %w", err)
	}
	extra, err := clientFields(p)
	if err != nil {
		return nil, err
	}
	for _, f := range extra {
		if _, set := fields[f.Name]; !set {
			fields[f.Name] = f.Value
		}
	}
	ci, err := clientInput(p)
	if err != nil {
		return nil, err
	}
	if ci != nil {
		var ours []json.RawMessage
		if err := unmarshal(fields["input"], &ours); err != nil || len(ours) == 0 {
			return nil, fmt.Errorf("built body has no input items")
		}
		user := ours[len(ours)-1]
		out := append(append([]json.RawMessage{}, ours[:len(ours)-1]...), ci.before...)
		if !ci.noUser {
			if user, err = withParts(user, ci.parts); err != nil {
				return nil, err
			}
			out = append(append(out, user), ci.after...)
		}
		if fields["input"], err = marshal(out); err != nil {
			return nil, err
		}
	}
	return marshal(fields)
}

// withParts appends parts to an encoded message's content
// (responsesbody.WithParts).
var withParts = responsesbody.WithParts
