// Package responsesbody is the OpenAI /responses request body a turn sends
// upstream (docs/request.md#the-wire-format): its parts, its encoding, and
// the transparent rule's part of it
// (docs/request.md#which-rule-applies-when). The envelope builds every body
// with it (services/envelope/request); the gateway's entrance builds the
// body of a transparent turn that needs nothing more (Plain) with the same
// code, so a turn that skips the envelope carries the body the envelope
// would have written (docs/architecture.md#entry-points).
package responsesbody

import (
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
)

// Body is the /responses request as built, before it is encoded (Encode
// writes it once, fields in this order).
type Body struct {
	Model              string
	PreviousResponseID string
	// Instructions are a transparent turn's own (the client's), followed by
	// the tool-call instructions (docs/tool-emulation.md) for a backend
	// without native function calling; otherwise unset.
	Instructions    string
	Input           []Item
	Tools           []tooldef.Tool
	ToolChoice      json.RawMessage
	MaxOutputTokens int
	// Fields are an HTTP client's parameters the rules do not govern
	// (ClientFields), in name order, after the rules' own.
	Fields []Field
}

// Item is an input item: a message the rules built, or an item a client
// sent (or a server-side call's output), sent verbatim.
type Item struct {
	Message *Message
	Raw     json.RawMessage
}

// Message is an input message item, written with "type":"message": OpenAI
// infers it, llama.cpp requires it.
type Message struct {
	Role    string
	Content []Part
}

// Part is an input content part. AGN-003 writes "type":"text"; the Responses
// API's input part is "input_text". Raw is a client's part (an image, a
// file) sent verbatim instead.
type Part struct {
	Text string
	Raw  json.RawMessage
}

// Field is a top-level body field a client sent.
type Field struct {
	Name  string
	Value json.RawMessage
}

// TextMessage is a message item of text parts.
func TextMessage(role string, texts ...string) Item {
	m := &Message{Role: role, Content: make([]Part, 0, len(texts))}
	for _, t := range texts {
		m.Content = append(m.Content, Part{Text: t})
	}
	return Item{Message: m}
}

// Start is a turn's body before any rule adds to it: the model, the
// response it continues, its output limit and, for a transparent turn
// (Framing none), the client's instructions, on this request only (OpenAI
// never carries them over previous_response_id). items is the room to
// make for input items.
func Start(req contracts.AgentExecuteRequest, model string, items int) Body {
	b := Body{Model: model, PreviousResponseID: req.ResponseContinuationId, MaxOutputTokens: req.MaxOutputTokens, Input: make([]Item, 0, items)}
	if !req.Framed() && req.OpenAI != nil {
		b.Instructions = req.OpenAI.Instructions
	}
	return b
}

// Plain is the encoded body of a transparent turn that asks for nothing
// Aptix adds: Start, then the client's fields and items (MergeVerbatim),
// with no context block, tools, tool choice or server-side outputs. It is
// the envelope's body for such a turn, byte for byte (the envelope's stage
// tests check it), so it is only for a request pipeline.EntryOf lets skip
// the envelope.
func Plain(req contracts.AgentExecuteRequest, model string) (json.RawMessage, error) {
	b := Start(req, model, 0)
	if err := b.MergeVerbatim(req.OpenAI, ""); err != nil {
		return nil, err
	}
	return b.Encode()
}

// Marshal encodes without HTML escaping: context blocks are full of <, > and
// &, and \u003c in a prompt helps no one reading the event.
func Marshal(v any) (json.RawMessage, error) {
	return jsonv2.Marshal(v, v1NoHTMLEscape)
}

// v1NoHTMLEscape is encoding/json's output with SetEscapeHTML(false),
// through the v2 engine (as pkg/pipeline's turn codec): every body is
// marshalled here, the context block included, and encoding/json validated
// and compacted each embedded raw item again (the benchmark's profile).
var v1NoHTMLEscape = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false))

// Unmarshal is json.Unmarshal through the v2 engine with v1 semantics.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, jsonv1.DefaultOptionsV1())
}

// StdError is encoding/json's error for data, the one a client was always
// told, where the faster decoder failed with err.
func StdError(data []byte, v any, err error) error {
	if e := json.Unmarshal(data, v); e != nil {
		return e
	}
	return err
}
