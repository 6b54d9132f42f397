package toolemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Rewritten is a /responses body after its <tool_call> blocks became
// function_call items.
type Rewritten struct {
	// Body is the rewritten body; nil when nothing needed to change.
	Body []byte
	// Calls are the calls found, in output order (Start/End are offsets in
	// the text part each came from).
	Calls []Call
	// Warnings say which blocks were left as text and why, and whether the
	// model ignored a required or forced tool_choice.
	Warnings []string
}

// functionCall is a Responses function_call output item, as OpenAI sends it.
type functionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// Rewrite parses the output_text parts of a /responses body's assistant
// messages. Each message keeps its text without the accepted blocks, and
// its calls follow it as function_call items, so a reader of the body (the
// mapper, a trace, a client) sees exactly what a backend with native
// function calling would have sent. A message left with no visible text is
// dropped, so an answer that is only a tool call maps to a tool-only result.
// Every other field and item passes through unchanged.
func (p *Parser) Rewrite(body []byte) (Rewritten, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return Rewritten{}, fmt.Errorf("response body: %w", err)
	}
	var items []json.RawMessage
	if raw := top["output"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &items); err != nil {
			return Rewritten{}, fmt.Errorf("response output: %w", err)
		}
	}
	var res Rewritten
	out := make([]json.RawMessage, 0, len(items))
	changed := false
	for i, item := range items {
		msg, calls, warnings, err := p.rewriteMessage(item)
		if err != nil {
			return Rewritten{}, fmt.Errorf("output[%d]: %w", i, err)
		}
		res.Warnings = append(res.Warnings, warnings...)
		if msg == nil && calls == nil {
			out = append(out, item)
			continue
		}
		changed = true
		if len(msg) > 0 {
			out = append(out, msg)
		}
		for i := range calls {
			c := &calls[i]
			c.ItemID = p.newID("fc_")
			fc, err := marshal(functionCall{Type: "function_call", ID: c.ItemID, CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Status: "completed"})
			if err != nil {
				return Rewritten{}, err
			}
			out = append(out, fc)
		}
		res.Calls = append(res.Calls, calls...)
	}
	if p.enabled() {
		res.Warnings = append(res.Warnings, p.choiceWarnings(res.Calls)...)
	}
	if !changed {
		return res, nil
	}
	var err error
	if top["output"], err = marshal(out); err != nil {
		return Rewritten{}, err
	}
	if res.Body, err = marshal(top); err != nil {
		return Rewritten{}, err
	}
	return res, nil
}

// rewriteMessage parses one output item. It returns nil, nil when the item
// is not an assistant message or holds no accepted call; otherwise the
// message without the blocks (empty when no text is left) and the calls.
func (p *Parser) rewriteMessage(item json.RawMessage) (json.RawMessage, []Call, []string, error) {
	var head struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	if json.Unmarshal(item, &head) != nil || head.Type != "message" || (head.Role != "" && head.Role != "assistant") {
		return nil, nil, nil, nil
	}
	var msg map[string]json.RawMessage
	var parts []map[string]json.RawMessage
	if json.Unmarshal(item, &msg) != nil || json.Unmarshal(msg["content"], &parts) != nil {
		return nil, nil, nil, nil // not a shape this package rewrites: passed through
	}
	var calls []Call
	var warnings []string
	kept := make([]map[string]json.RawMessage, 0, len(parts))
	for _, part := range parts {
		var typ, text string
		_ = json.Unmarshal(part["type"], &typ)
		if typ != "output_text" || json.Unmarshal(part["text"], &text) != nil {
			kept = append(kept, part)
			continue
		}
		r := p.parse(text)
		warnings = append(warnings, r.Warnings...)
		if len(r.Calls) == 0 {
			kept = append(kept, part)
			continue
		}
		calls = append(calls, r.Calls...)
		if strings.TrimSpace(r.Text) == "" {
			continue // the part was only tool calls
		}
		t, err := marshal(r.Text)
		if err != nil {
			return nil, nil, nil, err
		}
		part["text"] = t
		kept = append(kept, part)
	}
	if calls == nil {
		return nil, nil, warnings, nil
	}
	if len(kept) == 0 {
		return json.RawMessage{}, calls, warnings, nil
	}
	content, err := marshal(kept)
	if err != nil {
		return nil, nil, nil, err
	}
	msg["content"] = content
	m, err := marshal(msg)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, calls, warnings, nil
}

// marshal encodes without HTML escaping: the texts are full of < and >.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
