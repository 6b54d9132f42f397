package request

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// The transparent rule (Framing none, docs/request.md#which-rule-applies-when):
// a client of an OpenAI-compatible API talks to the model, not to AGN-003.
// Its input items go upstream in its order and bytes, its instructions are
// this request's instructions (never a system message, never carried to
// the next turn), and Aptix adds only what the client asked for: a context
// block when it asked for retrieval, appended to the message the question
// came from as one more text part.

// mergeVerbatim makes p's input the body's input, as sent.
func (b *Body) mergeVerbatim(p *contracts.OpenAIPassthrough, contextBlock string) error {
	var err error
	if b.Fields, err = clientFields(p); err != nil {
		return err
	}
	if p == nil || len(p.Input) == 0 {
		return &InvalidRequestError{Field: "openai.input", Reason: "is empty: a turn without AGN-003 framing sends the client's input items"}
	}
	var theirs []json.RawMessage
	if err := unmarshal(p.Input, &theirs); err != nil {
		return &InvalidRequestError{Field: "openai.input", Reason: "is not a JSON array: " + stdError(p.Input, &theirs, err).Error()}
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
	part, err := marshal(inputText{Type: "input_text", Text: text})
	if err != nil {
		return nil, err
	}
	out, err := withParts(msg, []json.RawMessage{part})
	if err != nil {
		return nil, &InvalidRequestError{Field: "openai.input", Reason: "instruction item: " + err.Error()}
	}
	return out, nil
}

type inputText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// joinInstructions puts Aptix's own instructions (tool emulation) after
// the client's, so neither is lost.
func joinInstructions(client, ours string) string {
	switch {
	case client == "":
		return ours
	case ours == "":
		return client
	}
	return client + "\n\n" + ours
}
