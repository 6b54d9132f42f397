package responsesbody

import (
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
)

// Encode writes the body once, with the options of Marshal (no HTML
// escaping): the rules' fields in the order they are easiest to read in a
// log, then the client's. Every string and verbatim item is written
// straight into the output; nothing is encoded twice.
func (b *Body) Encode() (json.RawMessage, error) {
	// Through Marshal, whose pooled encoder and buffer are sized by the
	// bodies before: the output is copied out once, at its size.
	return jsonv2.Marshal(b, v1NoHTMLEscape)
}

// MarshalJSONTo writes the body to enc.
func (b *Body) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := bodyWriter{enc: enc}
	w.token(jsontext.BeginObject)
	w.str("model", b.Model)
	if b.PreviousResponseID != "" {
		w.str("previous_response_id", b.PreviousResponseID)
	}
	if b.Instructions != "" {
		w.str("instructions", b.Instructions)
	}
	w.name("input")
	w.token(jsontext.BeginArray)
	for _, it := range b.Input {
		if it.Message == nil {
			w.value(it.Raw)
			continue
		}
		w.token(jsontext.BeginObject)
		w.str("type", "message")
		w.str("role", it.Message.Role)
		w.name("content")
		w.token(jsontext.BeginArray)
		for _, p := range it.Message.Content {
			if p.Raw != nil {
				w.value(p.Raw)
				continue
			}
			w.token(jsontext.BeginObject)
			w.str("type", "input_text")
			w.str("text", p.Text)
			w.token(jsontext.EndObject)
		}
		w.token(jsontext.EndArray)
		w.token(jsontext.EndObject)
	}
	w.token(jsontext.EndArray)
	if len(b.Tools) > 0 {
		w.name("tools")
		w.token(jsontext.BeginArray)
		for _, t := range b.Tools {
			w.tool(t)
		}
		w.token(jsontext.EndArray)
	}
	if len(b.ToolChoice) > 0 {
		w.name("tool_choice")
		w.value(b.ToolChoice)
	}
	if b.MaxOutputTokens != 0 {
		w.name("max_output_tokens")
		w.token(jsontext.Int(int64(b.MaxOutputTokens)))
	}
	for _, f := range b.Fields {
		w.name(f.Name)
		w.value(f.Value)
	}
	w.token(jsontext.EndObject)
	return w.err
}

// bodyWriter keeps the first error of a run of writes.
type bodyWriter struct {
	enc *jsontext.Encoder
	err error
}

func (w *bodyWriter) token(t jsontext.Token) {
	if w.err == nil {
		w.err = w.enc.WriteToken(t)
	}
}

func (w *bodyWriter) value(v json.RawMessage) {
	if w.err == nil {
		w.err = w.enc.WriteValue(jsontext.Value(v))
	}
}

func (w *bodyWriter) name(n string) { w.token(jsontext.String(n)) }

func (w *bodyWriter) str(n, v string) {
	w.name(n)
	w.token(jsontext.String(v))
}

// tool writes t as Tool.MarshalJSON does, into the body.
func (w *bodyWriter) tool(t tooldef.Tool) {
	if !t.IsFunction() {
		w.value(t.Raw)
		return
	}
	w.token(jsontext.BeginObject)
	w.str("type", "function")
	w.str("name", t.Name)
	if t.Description != "" {
		w.str("description", t.Description)
	}
	w.name("parameters")
	if len(t.Parameters) == 0 {
		w.token(jsontext.Null)
	} else {
		w.value(t.Parameters)
	}
	w.name("strict")
	w.token(jsontext.Bool(t.Strict))
	w.token(jsontext.EndObject)
}
