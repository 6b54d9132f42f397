// Package oresponse is the typed OpenAI Responses `response` object: the
// upstream body of a turn's model call, decoded once per hop and read by
// every stage and front door that answers from it (the LLM caller's trace
// and history, the mapper's AGN-004 fields, the gateway's Responses, Chat
// Completions and Messages answers).
//
// The fields Aptix reads are typed; everything else stays as the upstream
// wrote it. A decoded Response keeps the bytes it was decoded from, so
// Marshal gives them back byte for byte (unknown fields, nulls, key order,
// whitespace and escapes included) and each output Item keeps its own
// bytes, which the gateway sends as they are.
package oresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// opts decode as encoding/json would (the pipeline's codec): the v2
// engine with v1 semantics, about half the CPU.
var opts = jsonv1.DefaultOptionsV1()

// Statuses of a response.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Item types Aptix reads the fields of.
const (
	TypeMessage      = "message"
	TypeFunctionCall = "function_call"
)

// Response is a Responses API `response` object (or an error body such as
// {"error":{…}} or FastAPI's {"detail":…}, which share its error member).
// The typed fields are read-only views of the bytes: to change a document,
// build new bytes and Parse them.
type Response struct {
	ID     string
	Object string
	// CreatedAt is 0 when the body has none or not a number.
	CreatedAt int64
	Status    string
	Model     string
	// Output is nil when the body has no output member (or null).
	Output            []Item
	Usage             *Usage
	IncompleteDetails *IncompleteDetails
	Error             *Error
	// Detail is FastAPI's {"detail": …} error member, as sent.
	Detail json.RawMessage

	raw []byte
}

// Item is one output item. Message and function_call items have their
// fields typed; every item keeps its bytes in Raw.
type Item struct {
	Type   string
	ID     string
	Status string
	// Role and Content are a message's.
	Role    string
	Content []Part
	// CallID, Name and Arguments are a function_call's (Arguments exactly
	// as the model emitted them).
	CallID    string
	Name      string
	Arguments string
	// EncryptedContent and Redacted are a reasoning item's (an Anthropic
	// backend's thinking signature, and whether the thinking was
	// redacted); StopSequence is set by an Anthropic backend on the
	// message that stopped at one.
	EncryptedContent *string
	Redacted         bool
	StopSequence     *string
	// Raw is the item as the body has it.
	Raw json.RawMessage
}

// Part is one content part of a message item: output_text's Text, or a
// refusal's Refusal.
type Part struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// Usage is the usage object, in the Responses names and the Chat
// Completions names some servers send.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	TotalTokens      int `json:"total_tokens"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`

	InputTokensDetails      *TokenDetails `json:"input_tokens_details"`
	OutputTokensDetails     *TokenDetails `json:"output_tokens_details"`
	PromptTokensDetails     *TokenDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails *TokenDetails `json:"completion_tokens_details"`
}

// TokenDetails is the breakdown of input (cached) or output (reasoning)
// tokens.
type TokenDetails struct {
	CachedTokens    int `json:"cached_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	// CacheWriteTokens are input tokens written to the prompt cache: no
	// OpenAI field, the anthropic-messages backend's translation of
	// cache_creation_input_tokens.
	CacheWriteTokens int `json:"cache_write_tokens"`
}

// IncompleteDetails says why a response is incomplete; Raw is the member
// as sent.
type IncompleteDetails struct {
	Reason string
	Raw    json.RawMessage
}

// Error is a response's (or an error body's) error object.
type Error struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	// Param is nil when null, absent or not a string.
	Param *string `json:"-"`
	// Code is the code as sent: a string, a number or null.
	Code json.RawMessage `json:"code"`
}

// CodeString is the error's code: a string's value, a number's text, ""
// when null or absent.
func (e *Error) CodeString() string {
	if e == nil {
		return ""
	}
	var s string
	if json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	if len(e.Code) > 0 && string(e.Code) != "null" {
		return string(e.Code)
	}
	return ""
}

// Parse decodes data, which the Response keeps (the caller must not
// change it afterwards). A body that is null decodes to an empty document,
// as encoding/json would; one that is not a JSON object, or whose fields
// Aptix reads have the wrong type, is an error.
func Parse(data []byte) (*Response, error) {
	r := &Response{}
	if err := r.parse(data); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseString decodes s (see Parse); the document's bytes are a copy.
func ParseString(s string) (*Response, error) { return Parse([]byte(s)) }

// Bytes are the document's bytes: those it was decoded from, or for a
// Response built in Go its encoding.
func (r *Response) Bytes() []byte {
	b, _ := r.MarshalJSON()
	return b
}

// MarshalJSON gives back the bytes the document was decoded from; a
// Response built in Go encodes its typed fields.
func (r *Response) MarshalJSON() ([]byte, error) {
	if r.raw != nil {
		return r.raw, nil
	}
	return r.encode()
}

// UnmarshalJSON decodes a copy of data.
func (r *Response) UnmarshalJSON(data []byte) error {
	*r = Response{}
	return r.parse(bytes.Clone(data))
}

// top is what one decode of a document reads: the members Aptix reads,
// typed, and the others as they are (copies of small values).
type top struct {
	ID                string         `json:"id"`
	Status            string         `json:"status"`
	Model             string         `json:"model"`
	Object            jsontext.Value `json:"object"`
	CreatedAt         jsontext.Value `json:"created_at"`
	Output            []itemAt       `json:"output"`
	Usage             *Usage         `json:"usage"`
	IncompleteDetails jsontext.Value `json:"incomplete_details"`
	Error             jsontext.Value `json:"error"`
	Detail            jsontext.Value `json:"detail"`
}

// itemAt is an output item and where its bytes are in the document.
type itemAt struct {
	Item
	start, end int
}

// UnmarshalJSONFrom decodes the item from its bytes where the decoder
// read them, once: the document's own scan is the other.
func (it *itemAt) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	it.end = int(dec.InputOffset())
	it.start = it.end - len(v)
	it.Item, err = item(v)
	return err
}

func (r *Response) parse(raw []byte) error {
	var t top
	if err := jsonv2.Unmarshal(raw, &t, opts); err != nil {
		return err
	}
	r.ID, r.Status, r.Model, r.Usage = t.ID, t.Status, t.Model, t.Usage
	r.Object = lenientString(t.Object)
	var f float64
	if len(t.CreatedAt) > 0 && jsonv2.Unmarshal(t.CreatedAt, &f, opts) == nil {
		r.CreatedAt = int64(f)
	}
	if t.Output != nil {
		r.Output = make([]Item, len(t.Output))
		for i, it := range t.Output {
			r.Output[i] = it.Item
			r.Output[i].Raw = raw[it.start:it.end:it.end] // the document's bytes, not the decoder's
		}
	}
	if v := t.IncompleteDetails; !isNull(v) {
		var d struct {
			Reason string `json:"reason"`
		}
		if err := jsonv2.Unmarshal(v, &d, opts); err != nil {
			return fmt.Errorf("decode incomplete_details: %w", err)
		}
		r.IncompleteDetails = &IncompleteDetails{Reason: d.Reason, Raw: json.RawMessage(v)}
	}
	if v := t.Error; !isNull(v) {
		var e struct {
			Error
			Param jsontext.Value `json:"param"`
		}
		if err := jsonv2.Unmarshal(v, &e, opts); err != nil {
			return fmt.Errorf("decode error: %w", err)
		}
		r.Error = &e.Error
		if len(e.Param) > 0 && e.Param[0] == '"' {
			p := lenientString(e.Param)
			r.Error.Param = &p
		}
	}
	if len(t.Detail) > 0 {
		r.Detail = json.RawMessage(t.Detail)
	}
	r.raw = raw
	return nil
}

// item decodes one output item: the fields of the types Aptix reads,
// the type, id and status of any other (leniently: an item type Aptix
// does not know may shape them as it likes). One decode reads them all
// when they have their usual types; the per-type one only runs when not.
func item(raw []byte) (Item, error) {
	if raw[0] != '{' {
		return Item{}, errors.New("not an object")
	}
	var u union
	if jsonv2.Unmarshal(raw, &u, opts) == nil {
		return Item{Type: u.Type, ID: u.ID, Status: u.Status, Role: u.Role, Content: u.Content,
			CallID: u.CallID, Name: u.Name, Arguments: u.Arguments,
			EncryptedContent: u.EncryptedContent, Redacted: u.Redacted, StopSequence: u.StopSequence, Raw: raw}, nil
	}
	var head struct {
		Type   json.RawMessage `json:"type"`
		ID     json.RawMessage `json:"id"`
		Status json.RawMessage `json:"status"`
	}
	if err := jsonv2.Unmarshal(raw, &head, opts); err != nil {
		return Item{}, err
	}
	it := Item{Type: lenientString(head.Type), Raw: raw}
	switch it.Type {
	case TypeMessage:
		var m struct {
			ID      string `json:"id"`
			Status  string `json:"status"`
			Role    string `json:"role"`
			Content []Part `json:"content"`
		}
		if err := jsonv2.Unmarshal(raw, &m, opts); err != nil {
			return Item{}, err
		}
		it.ID, it.Status, it.Role, it.Content = m.ID, m.Status, m.Role, m.Content
	case TypeFunctionCall:
		var f struct {
			ID        string `json:"id"`
			Status    string `json:"status"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		if err := jsonv2.Unmarshal(raw, &f, opts); err != nil {
			return Item{}, err
		}
		it.ID, it.Status, it.CallID, it.Name, it.Arguments = f.ID, f.Status, f.CallID, f.Name, f.Arguments
	default:
		it.ID, it.Status = lenientString(head.ID), lenientString(head.Status)
	}
	return it, nil
}

// union is every field item reads, of every type it reads.
type union struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Status    string `json:"status"`
	Role      string `json:"role"`
	Content   []Part `json:"content"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`

	EncryptedContent *string `json:"encrypted_content"`
	Redacted         bool    `json:"redacted"`
	StopSequence     *string `json:"stop_sequence"`
}

// ParseItem decodes one output item that is not part of a document (one
// a front door made); the Item keeps raw.
func ParseItem(raw []byte) (Item, error) {
	if len(raw) == 0 {
		return Item{}, errors.New("empty item")
	}
	return item(raw) // its decode validates raw

}

// MarshalJSON gives back the item's bytes; an Item built in Go encodes its
// typed fields.
func (it Item) MarshalJSON() ([]byte, error) {
	if it.Raw != nil {
		return it.Raw, nil
	}
	m := map[string]any{"type": it.Type}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("id", it.ID)
	set("status", it.Status)
	set("role", it.Role)
	set("call_id", it.CallID)
	set("name", it.Name)
	if it.Type == TypeFunctionCall {
		m["arguments"] = it.Arguments
	}
	if it.Content != nil {
		m["content"] = it.Content
	}
	return json.Marshal(m)
}

// encode is a Response built in Go, its typed fields only.
func (r *Response) encode() ([]byte, error) {
	m := map[string]any{}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("id", r.ID)
	set("object", r.Object)
	set("status", r.Status)
	set("model", r.Model)
	if r.CreatedAt != 0 {
		m["created_at"] = r.CreatedAt
	}
	if r.Output != nil {
		m["output"] = r.Output
	}
	if r.Usage != nil {
		m["usage"] = r.Usage
	}
	if d := r.IncompleteDetails; d != nil {
		m["incomplete_details"] = map[string]string{"reason": d.Reason}
		if d.Raw != nil {
			m["incomplete_details"] = d.Raw
		}
	}
	if e := r.Error; e != nil {
		em := map[string]any{"message": e.Message, "type": e.Type, "param": e.Param, "code": nil}
		if len(e.Code) > 0 {
			em["code"] = e.Code
		}
		m["error"] = em
	}
	if r.Detail != nil {
		m["detail"] = r.Detail
	}
	return json.Marshal(m)
}

// OutputItems are the output items' bytes, as the body has them; an
// empty list (not nil) when the body has an empty output, nil when it has
// none.
func (r *Response) OutputItems() []json.RawMessage {
	if r.Output == nil {
		return nil
	}
	out := make([]json.RawMessage, len(r.Output))
	for i, it := range r.Output {
		out[i], _ = it.MarshalJSON()
	}
	return out
}

// Finish reasons (AGN-004 §2.4, docs/mapping.md#finish-reason).
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolUse       = "tool_use"
	FinishContentFilter = "content_filter"
	FinishError         = "error"
)

// FinishReason derives AGN-004's finish reason, which the Responses API
// does not send: from status, incomplete_details and the items.
func (r *Response) FinishReason() string {
	switch r.Status {
	case StatusFailed:
		return FinishError
	case StatusIncomplete:
		if r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter" {
			return FinishContentFilter
		}
		return FinishLength
	}
	for _, it := range r.Output {
		if it.Type == TypeFunctionCall {
			return FinishToolUse
		}
	}
	return FinishStop
}

// OutputText is the concatenated output_text of the message items, like
// the SDKs' convenience property.
func (r *Response) OutputText() string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type != TypeMessage {
			continue
		}
		for _, p := range it.Content {
			if p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}

// Tokens are the input and output tokens, in the Responses names when set,
// else the Chat Completions ones.
func (u *Usage) Tokens() (in, out int) {
	if u == nil {
		return 0, 0
	}
	in, out = u.InputTokens, u.OutputTokens
	if in == 0 {
		in = u.PromptTokens
	}
	if out == 0 {
		out = u.CompletionTokens
	}
	return in, out
}

func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// lenientString is v's value when v is a JSON string, else "".
func lenientString(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && bytes.IndexByte(inner, '"') < 0 && utf8.Valid(inner) {
		return string(inner) // no escapes: the common case, without a decoder
	}
	var s string
	if jsonv2.Unmarshal(v, &s, opts) != nil {
		return ""
	}
	return s
}
