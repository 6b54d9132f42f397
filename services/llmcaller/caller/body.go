package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
)

var v1Semantics = jsonv1.DefaultOptionsV1()

// body is a /responses body opened at the top level only, so every field the
// envelope wrote (and any this package does not know) passes through intact.
type body map[string]json.RawMessage

// openBody opens raw (openRequest, without what sending it needs).
func openBody(raw json.RawMessage) (body, error) {
	r, err := openRequest(raw)
	if err != nil {
		return nil, err
	}
	return r.b, nil
}

// request is a body to send: raw as the envelope wrote it, and its
// top-level members, whose values alias raw. The call changes the members
// it must (the stream flag, background, a replayed or truncated input);
// encode sends raw as it is when none changed, and otherwise writes each
// unchanged member as raw has it and only the changed ones anew: the
// context block, most of the body, is copied, never decoded or encoded
// again.
type request struct {
	raw     json.RawMessage
	b       body
	members []member // in raw's order
}

// member is one top-level member of raw.
type member struct {
	name  string
	value json.RawMessage // as in b when unchanged
	text  []byte          // the member from its name to the end of its value
	last  bool            // the last member of this name (a repeated name's value is the last one's)
}

// openRequest reads raw's top-level members, validating the whole body
// once (the v2 engine's tokenizer, with v1 semantics) without copying any
// value.
func openRequest(raw json.RawMessage) (*request, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw), v1Semantics)
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if tok.Kind() != '{' {
		if tok.Kind() == 'n' {
			return nil, errors.New("request body is null")
		}
		return nil, fmt.Errorf("request body is not a JSON object: it starts with %s", tok.Kind())
	}
	r := &request{raw: raw, b: body{}}
	prev := int(dec.InputOffset())
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("request body is not a JSON object: %w", err)
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("request body is not a JSON object: %w", err)
		}
		end := int(dec.InputOffset())
		m := member{name: name, value: raw[end-len(v) : end : end], text: bytes.TrimLeft(raw[prev:end], " \t\r\n,"), last: true}
		prev = end
		if _, dup := r.b[m.name]; dup {
			for i := range r.members {
				if r.members[i].name == m.name {
					r.members[i].last = false
				}
			}
		}
		r.b[m.name] = m.value
		r.members = append(r.members, m)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("request body is not a JSON object: data after its end")
	}
	return r, nil
}

// encode is the body to send: raw when no member changed, else raw's
// members in raw's order, changed values in place, removed ones left out,
// added ones last (by name). Every value the call sets is JSON it wrote
// (a literal, or encoding/json's output), so nothing is validated again.
func (r *request) encode() ([]byte, error) {
	unchanged, names := true, 0
	for _, m := range r.members {
		if !m.last {
			continue
		}
		names++
		if v, ok := r.b[m.name]; !ok || !same(v, m.value) {
			unchanged = false
			break
		}
	}
	if unchanged && names == len(r.b) {
		return r.raw, nil
	}
	out := make([]byte, 0, len(r.raw)+64)
	out = append(out, '{')
	member := func(name string, v json.RawMessage) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out, _ = jsontext.AppendQuote(out, name)
		out = append(out, ':')
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		out = append(out, v...)
	}
	seen := make(map[string]bool, len(r.members))
	for _, m := range r.members {
		seen[m.name] = true
		v, ok := r.b[m.name]
		switch {
		case !ok || !m.last:
		case same(v, m.value):
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, m.text...)
		default:
			member(m.name, v)
		}
	}
	var added []string
	for name := range r.b {
		if !seen[name] {
			added = append(added, name)
		}
	}
	slices.Sort(added)
	for _, name := range added {
		member(name, r.b[name])
	}
	return append(out, '}'), nil
}

// same reports whether a and b are the same bytes in memory: a member's
// value is unchanged while it still is raw's.
func same(a, b json.RawMessage) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// setStream makes the body's stream flag agree with the call mode and
// reports whether that changed the body.
func (b body) setStream(stream bool) (changed bool) {
	cur, ok := b["stream"]
	if stream {
		if ok && bytes.Equal(bytes.TrimSpace(cur), []byte("true")) {
			return false
		}
		b["stream"] = json.RawMessage("true")
		return true
	}
	delete(b, "stream")
	return ok
}

// setBackground asks for a background response (kept upstream, readable
// and resumable by id), streamed so its id arrives first, and stored, which
// background mode requires. A body that says store:false is left alone and
// reports false: the client asked the backend not to keep it.
func (b body) setBackground() bool {
	if bytes.Equal(bytes.TrimSpace(b["store"]), []byte("false")) {
		return false
	}
	b["background"], b["store"], b["stream"] = json.RawMessage("true"), json.RawMessage("true"), json.RawMessage("true")
	return true
}

// inputItems returns the input as items; a string input becomes one user message.
func (b body) inputItems() ([]json.RawMessage, error) {
	raw := bytes.TrimSpace(b["input"])
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("decode input string: %w", err)
		}
		msg, err := json.Marshal(map[string]any{"type": "message", "role": "user",
			"content": []map[string]string{{"type": "input_text", "text": s}}})
		if err != nil {
			return nil, fmt.Errorf("encode input message: %w", err)
		}
		return []json.RawMessage{msg}, nil
	}
	var items []json.RawMessage
	// The v2 engine, as openBody: the input is most of the body (the
	// context block), and a replayed call stores its items (turn.record).
	if err := jsonv2.Unmarshal(raw, &items, v1Semantics); err != nil {
		return nil, fmt.Errorf("input is neither a string nor an array of items: %w", err)
	}
	return items, nil
}

// keptItems is the record of one call that conversation recovery follows
// (recover.go; releases before it stored one per turn): a link to the
// previous response (when there is one), the input items and the output
// items, as one JSON array. An input array is spliced in as it is, not split into items and
// joined again: it holds the context block, most of a turn's bytes.
func (b body) keptItems(output []json.RawMessage) ([]byte, error) {
	var head []json.RawMessage
	if prev := b.previousResponseID(); prev != "" {
		l, err := json.Marshal(link{Type: linkType, ID: prev})
		if err != nil {
			return nil, err
		}
		head = append(head, l)
	}
	in := bytes.TrimSpace(b["input"])
	if len(in) < 2 || in[0] != '[' || in[len(in)-1] != ']' {
		input, err := b.inputItems() // a string, or nothing
		if err != nil {
			return nil, err
		}
		return encodeItems(append(append(head, input...), output...))
	}
	inner := bytes.TrimSpace(in[1 : len(in)-1])
	if len(inner) == 0 {
		return encodeItems(append(head, output...))
	}
	out := make([]byte, 0, len(inner)+256*(len(head)+len(output)))
	out = append(out, '[')
	for _, it := range head {
		out = append(append(out, it...), ',')
	}
	out = append(out, inner...)
	for _, it := range output {
		if len(it) == 0 {
			return nil, errors.New("an empty output item")
		}
		out = append(append(out, ','), it...)
	}
	return append(out, ']'), nil
}

func (b body) previousResponseID() string {
	var id string
	_ = json.Unmarshal(b["previous_response_id"], &id)
	return id
}

// errHistoryMissing marks a continuation whose history Aptix does not hold:
// a final error, not a transient one.
var errHistoryMissing = errors.New("conversation history is missing")

// replayHistory implements continuation for a backend without
// previous_response_id: the field is removed and the items Aptix stored
// under that response id are prepended to the input. It returns the full
// input items now in the body, which the caller stores under the new
// response id after a successful call.
//
// A response made by a backend that threads by previous_response_id has no
// such record (those calls write none): the conversation then moves here
// from that backend, and its items are read from its calls' events as
// recovery reads them (chain, recover.go). Without that, a conversation
// could move from Chat Completions to a Responses backend but not back, and
// failed naming an upstream id the client never saw.
func replayHistory(ctx context.Context, hs, chain HistoryStore, b body) ([]json.RawMessage, error) {
	input, err := b.inputItems()
	if err != nil {
		return nil, err
	}
	prev := b.previousResponseID()
	if prev == "" {
		return input, nil
	}
	if hs == nil && chain == nil {
		return nil, fmt.Errorf("%w: previous_response_id %q cannot be replayed: no history store configured", errHistoryMissing, prev)
	}
	items, err := []json.RawMessage(nil), ErrHistoryNotFound
	if hs != nil {
		items, err = hs.Get(ctx, prev)
	}
	if errors.Is(err, ErrHistoryNotFound) && chain != nil {
		items, err = loadChain(ctx, chain, prev)
	}
	if errors.Is(err, ErrHistoryNotFound) {
		return nil, fmt.Errorf("%w: no stored items for previous_response_id %q (this backend does not thread by previous_response_id, so Aptix replays its own copy)", errHistoryMissing, prev)
	}
	if errors.Is(err, errHistoryMissing) {
		return nil, fmt.Errorf("previous_response_id %q: %w", prev, err)
	}
	if err != nil {
		return nil, fmt.Errorf("load history of %q: %w", prev, err)
	}
	all := append(items, input...)
	raw, err := json.Marshal(all)
	if err != nil {
		return nil, fmt.Errorf("encode replayed input: %w", err)
	}
	delete(b, "previous_response_id")
	b["input"] = raw
	return all, nil
}

// bodies decodes a response body the call reads once, however many of
// its readers ask (the history record, the trace, the stream's done
// delta): the typed document (oresponse), the one decoder of upstream
// bodies. A nil *bodies decodes every time (recovery reads stored calls).
type bodies struct {
	body string
	doc  *oresponse.Response
	set  bool
}

// of is body's document; false when body is no response object.
func (b *bodies) of(body string) (*oresponse.Response, bool) {
	if b == nil {
		doc, err := oresponse.ParseString(body)
		return doc, err == nil && doc != nil
	}
	if !b.set || b.body != body {
		b.doc, _ = oresponse.ParseString(body)
		b.body, b.set = body, true
	}
	return b.doc, b.doc != nil
}
