package sandbox

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"
)

// entry is one conversation item decoded once per request: validation, the
// tool rule, the reply and the compaction all read it, and a user message
// carries ~10 KB of context, so decoding it again at every step dominated
// the sandbox's CPU.
type entry struct {
	// raw is the item as sent or stored: stored chains, token counts and
	// compaction ids use the bytes, never a re-encoding.
	raw json.RawMessage
	// it is what json.Unmarshal filled in, even when it failed part way
	// (readTurn has always read such an item as far as it decoded).
	it item
	// err is why it did not decode: a 400 for an input item; the other
	// readers of a stored item skip one that does not decode.
	err error
}

// decodeEntry decodes a raw item; its content is decoded on first use.
func decodeEntry(raw json.RawMessage) entry {
	e := entry{raw: raw}
	e.err = json.Unmarshal(raw, &e.it)
	e.it.body = &content{raw: e.it.Content}
	return e
}

// decodeEntries decodes the items of a stored chain, which were validated
// when they were first sent.
func decodeEntries(raws []json.RawMessage) []entry {
	out := make([]entry, len(raws))
	for i, raw := range raws {
		out[i] = decodeEntry(raw)
	}
	return out
}

// raws returns the items' bytes, for the stored chain.
func raws(entries []entry) []json.RawMessage {
	out := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		out[i] = e.raw
	}
	return out
}

// content is a message's content, decoded at most once however often its
// texts or parts are read. It is shared by every copy of its item.
type content struct {
	raw   json.RawMessage
	done  bool // decoded: texts and parts are set
	texts []string
	parts []part
}

// get decodes the content on first use: a JSON string (or null) is one
// text; an array is parts, whose text parts are the texts. Anything else,
// or an array that does not decode as parts, has neither.
func (c *content) get() *content {
	if c.done {
		return c
	}
	c.done = true
	if len(c.raw) == 0 {
		return c
	}
	// Only an array can be parts, and an array is never a string: skipping
	// the string attempt spares a failed decode of the whole array.
	if c.raw.Kind() != jsontext.KindBeginArray {
		var s string
		if json.Unmarshal(c.raw, &s) == nil {
			c.texts = []string{s}
			return c // a null content decodes as parts too, but as none
		}
	}
	if json.Unmarshal(c.raw, &c.parts) != nil {
		c.parts = nil
		return c
	}
	for _, p := range c.parts {
		if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
			c.texts = append(c.texts, p.Text)
		}
	}
	return c
}

// element is one item of an input array as split from it, with what
// validateItem checks before it decodes the item.
type element struct {
	raw json.RawMessage
	// object is whether raw is a JSON object or null: what decodes into a
	// map[string]json.RawMessage without error.
	object bool
	// typed is whether raw has a top-level "type" or "role" member, matched
	// as a map[string]json.RawMessage key is: exactly, escapes decoded.
	typed bool
}

// splitInput splits an input array into its items in one pass and notes,
// per item, whether it is an object with a type or role: the array need not
// be decoded into copies, nor each item into a map, to find that out. The
// items' bytes alias in. The options are json.Unmarshal's, so what it
// accepts (duplicate names, invalid UTF-8) splits the same way.
func splitInput(in []byte) ([]element, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(in), json.DefaultOptionsV1())
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("split input: %w", err)
	}
	if tok.Kind() != jsontext.KindBeginArray {
		return nil, fmt.Errorf("split input: %v is not an array", tok.Kind())
	}
	var out []element
	for dec.PeekKind() != jsontext.KindEndArray {
		el, err := readElement(dec, in)
		if err != nil {
			return nil, fmt.Errorf("split input: %w", err)
		}
		out = append(out, el)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("split input: %w", err)
	}
	return out, nil
}

// readElement reads the next array element of dec, which reads in. An
// object is read member by member, only to see its names; anything else is
// read whole.
func readElement(dec *jsontext.Decoder, in []byte) (element, error) {
	if kind := dec.PeekKind(); kind != jsontext.KindBeginObject {
		v, err := dec.ReadValue()
		if err != nil {
			return element{}, err
		}
		end := int(dec.InputOffset())
		return element{raw: in[end-len(v) : end : end], object: kind == jsontext.KindNull}, nil
	}
	if _, err := dec.ReadToken(); err != nil {
		return element{}, err
	}
	start := int(dec.InputOffset()) - 1 // the opening brace
	el := element{object: true}
	for dec.PeekKind() == jsontext.KindString {
		name, err := dec.ReadToken()
		if err != nil {
			return element{}, err
		}
		if k := name.String(); k == "type" || k == "role" {
			el.typed = true
		}
		if err := dec.SkipValue(); err != nil {
			return element{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return element{}, err
	}
	end := int(dec.InputOffset())
	el.raw = in[start:end:end]
	return el, nil
}
