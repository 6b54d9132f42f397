package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

var v1Semantics = jsonv1.DefaultOptionsV1()

// body is a /responses body opened at the top level only, so every field the
// envelope wrote (and any this package does not know) passes through intact.
type body map[string]json.RawMessage

// openBody and encode run on every call with the whole body (the context
// block is most of it): they use the v2 JSON engine with v1 semantics, about
// twice as fast as encoding/json here (the benchmark's profile put the pair
// at 7% of a turn's CPU).
func openBody(raw json.RawMessage) (body, error) {
	var b body
	if err := jsonv2.Unmarshal(raw, &b, v1Semantics); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	if b == nil {
		return nil, errors.New("request body is null")
	}
	return b, nil
}

func (b body) encode() ([]byte, error) {
	out, err := jsonv2.Marshal(map[string]json.RawMessage(b), v1Semantics)
	if err != nil {
		return nil, fmt.Errorf("encode request body: %w", err)
	}
	return out, nil
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
func replayHistory(ctx context.Context, hs HistoryStore, b body) ([]json.RawMessage, error) {
	input, err := b.inputItems()
	if err != nil {
		return nil, err
	}
	prev := b.previousResponseID()
	if prev == "" {
		return input, nil
	}
	if hs == nil {
		return nil, fmt.Errorf("%w: previous_response_id %q cannot be replayed: no history store configured", errHistoryMissing, prev)
	}
	items, err := hs.Get(ctx, prev)
	if errors.Is(err, ErrHistoryNotFound) {
		return nil, fmt.Errorf("%w: no stored items for previous_response_id %q (this backend does not thread by previous_response_id, so Aptix replays its own copy)", errHistoryMissing, prev)
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

// responseSummary is what the caller reads back from a response body: enough
// for tracing, finish reasons and history.
type responseSummary struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []json.RawMessage `json:"output"`
	Usage  *struct {
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func summarize(raw string) (responseSummary, bool) {
	var s responseSummary
	if jsonv2.Unmarshal([]byte(raw), &s, v1Semantics) != nil {
		return s, false
	}
	return s, true
}

// finishReason derives AGN-004's finish reason (docs/mapping.md#finish-reason): there is none
// on the wire.
func (s responseSummary) finishReason() string {
	switch s.Status {
	case "failed":
		return "error"
	case "incomplete":
		if s.IncompleteDetails != nil && s.IncompleteDetails.Reason == "content_filter" {
			return "content_filter"
		}
		return "length"
	}
	for _, it := range s.Output {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(it, &head) == nil && head.Type == "function_call" {
			return "tool_use"
		}
	}
	return "stop"
}

func (s responseSummary) tokens() (in, out int) {
	if s.Usage == nil {
		return 0, 0
	}
	in, out = s.Usage.InputTokens, s.Usage.OutputTokens
	if in == 0 {
		in = s.Usage.PromptTokens
	}
	if out == 0 {
		out = s.Usage.CompletionTokens
	}
	return in, out
}
