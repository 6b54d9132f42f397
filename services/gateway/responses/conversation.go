package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// OpenAI's Conversations API (docs/http-api.md#conversations): a
// conversation object is a list of items the client and its responses add
// to. Aptix keeps it as one record (the adapter stores it in KV) and sends
// its items as the model's prior context on each response created with
// conversation; the turns of such responses run in the Aptix conversation
// of the same id.

// ConversationPrefix starts every conversation object's id. A conversation
// parameter with it names such an object; any other names an Aptix
// conversation (docs/http-api.md#continuation-and-branching).
const ConversationPrefix = "conv_"

// MaxItemsPerCall is OpenAI's limit on the items one create or append adds.
const MaxItemsPerCall = 20

// IsConversationID reports whether id can name a conversation object: its
// prefix and a subject token, so it is safe for a key.
func IsConversationID(id string) bool {
	return len(id) > len(ConversationPrefix) && strings.HasPrefix(id, ConversationPrefix) && contracts.IsToken(id)
}

// Conversation is the stored record of a conversation object.
type Conversation struct {
	ID        string            `json:"id"`
	CreatedAt int64             `json:"createdAt"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Owner is the principal that created it; for any other it does not exist.
	Owner   string  `json:"owner,omitempty"`
	Entries []Entry `json:"entries"`
}

// Entry is one item of the conversation, or a response created in it: its
// input items, and the place of its output until that is in (the response
// has ended), so the output lands after the input it answers whatever was
// added meanwhile.
type Entry struct {
	Item json.RawMessage `json:"item,omitempty"`
	// Pending is the response whose output is not in yet; Input its input
	// items, which are the conversation's from the start.
	Pending *Meta             `json:"pending,omitempty"`
	Input   []json.RawMessage `json:"input,omitempty"`
}

// ConversationObject is OpenAI's conversation object.
type ConversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// Object is the conversation as the API answers it.
func (c *Conversation) Object() ConversationObject {
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return ConversationObject{ID: c.ID, Object: "conversation", CreatedAt: c.CreatedAt, Metadata: md}
}

// Deleted is the answer to a conversation's deletion.
func (c *Conversation) Deleted() map[string]any {
	return map[string]any{"id": c.ID, "object": "conversation.deleted", "deleted": true}
}

// Items are the conversation's items, oldest first; a pending response's
// output is not among them yet.
func (c *Conversation) Items() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(c.Entries))
	for _, e := range c.Entries {
		if e.Pending == nil {
			out = append(out, e.Item)
		} else {
			out = append(out, e.Input...)
		}
	}
	return out
}

// Pending are the responses whose output is not in yet.
func (c *Conversation) Pending() []*Meta {
	var out []*Meta
	for _, e := range c.Entries {
		if e.Pending != nil {
			out = append(out, e.Pending)
		}
	}
	return out
}

// Append adds items (already given ids by ConversationItems).
func (c *Conversation) Append(items []json.RawMessage) {
	for _, it := range items {
		c.Entries = append(c.Entries, Entry{Item: it})
	}
}

// AppendPending adds a response's input items and keeps the place of its
// output. The record keeps what reading the response's status back needs,
// not its echoed parameters.
func (c *Conversation) AppendPending(m Meta, input []json.RawMessage) {
	m.Echo = nil
	c.Entries = append(c.Entries, Entry{Pending: &m, Input: input})
}

// Settle puts a finished response's output items after its input.
func (c *Conversation) Settle(responseID string, output []json.RawMessage) {
	i := c.pendingAt(responseID)
	if i < 0 {
		return
	}
	items := make([]Entry, 0, len(c.Entries[i].Input)+len(output))
	for _, it := range append(c.Entries[i].Input, output...) {
		items = append(items, Entry{Item: it})
	}
	c.Entries = slices.Replace(c.Entries, i, i+1, items...)
}

// Withdraw removes a response that never ran (its submit failed) with its
// input items; false when it is not pending here.
func (c *Conversation) Withdraw(responseID string) bool {
	i := c.pendingAt(responseID)
	if i >= 0 {
		c.Entries = slices.Delete(c.Entries, i, i+1)
	}
	return i >= 0
}

func (c *Conversation) pendingAt(responseID string) int {
	return slices.IndexFunc(c.Entries, func(e Entry) bool { return e.Pending != nil && e.Pending.ID == responseID })
}

// Find returns the item with id.
func (c *Conversation) Find(id string) (json.RawMessage, bool) {
	for _, it := range c.Items() {
		if itemID(it) == id {
			return it, true
		}
	}
	return nil, false
}

// Remove deletes the item with id; false when there is none.
func (c *Conversation) Remove(id string) bool {
	for i, e := range c.Entries {
		if e.Pending == nil && itemID(e.Item) == id {
			c.Entries = slices.Delete(c.Entries, i, i+1)
			return true
		}
		if e.Pending != nil {
			if j := slices.IndexFunc(e.Input, func(it json.RawMessage) bool { return itemID(it) == id }); j >= 0 {
				c.Entries[i].Input = slices.Delete(e.Input, j, j+1)
				return true
			}
		}
	}
	return false
}

// contextTypes are the item types the model is shown as prior context. The
// others are Aptix's own (mcp_list_tools, mcp_call, file_search_call: tools
// that ran here, already answered in the messages) or need the upstream's
// stored state (reasoning), which a new turn does not have.
var contextTypes = map[string]bool{"message": true, "function_call": true, "function_call_output": true}

// ContextItems are items as the model is shown them before a new turn's
// input: the types it can take, without the ids and statuses only the
// conversation's listing needs.
func ContextItems(items []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		var typ string
		_ = json.Unmarshal(m["type"], &typ)
		if !contextTypes[typ] {
			continue
		}
		delete(m, "id")
		delete(m, "status")
		b, err := json.Marshal(m)
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// ConversationItems validates items a client adds (a create's items, an
// append, a response's input) as a create's input is validated, then gives
// each one an id derived from key (a response's id, or a fresh one for an
// append) and its content as parts, as the listing shows them.
func ConversationItems(param string, raw json.RawMessage, key string) ([]json.RawMessage, *Error) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalid(param, CodeInvalidType, "Invalid type for '%s': expected an array of items.", param)
	}
	if len(items) > MaxItemsPerCall {
		return nil, invalid(param, "array_above_max_length", "Invalid '%s': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", param, MaxItemsPerCall, len(items))
	}
	if len(items) == 0 {
		return nil, nil
	}
	r := &CreateRequest{}
	if e := r.parseInput(raw); e != nil {
		if e.Param != nil {
			e.Param = ptr(strings.Replace(*e.Param, "input", param, 1))
		}
		e.Message = strings.ReplaceAll(e.Message, "'input", "'"+param)
		return nil, e
	}
	items = InputItems(key, r.Input)
	if e := CheckItemIDs(param, items); e != nil {
		return nil, e
	}
	return items, nil
}

// ParseConversationCreate reads POST /v1/conversations: optional items (at
// most 20) and metadata.
func ParseConversationCreate(data []byte, key string) (items []json.RawMessage, md map[string]string, e *Error) {
	raw, e := parseObject(data, "items", "metadata")
	if e != nil {
		return nil, nil, e
	}
	if v, ok := raw["items"]; ok && !isNull(v) {
		if items, e = ConversationItems("items", v, key); e != nil {
			return nil, nil, e
		}
	}
	md, e = parseMetadata(raw["metadata"])
	return items, md, e
}

// ParseConversationUpdate reads POST /v1/conversations/{id}: metadata,
// required, which replaces the conversation's.
func ParseConversationUpdate(data []byte) (map[string]string, *Error) {
	raw, e := parseObject(data, "metadata")
	if e != nil {
		return nil, e
	}
	if isNull(raw["metadata"]) {
		return nil, invalid("metadata", CodeMissingParameter, "Missing required parameter: 'metadata'.")
	}
	md, e := parseMetadata(raw["metadata"])
	if md == nil {
		md = map[string]string{}
	}
	return md, e
}

// ParseItemsAppend reads POST /v1/conversations/{id}/items: items, required,
// 1 to 20.
func ParseItemsAppend(data []byte, key string) ([]json.RawMessage, *Error) {
	raw, e := parseObject(data, "items")
	if e != nil {
		return nil, e
	}
	if isNull(raw["items"]) {
		return nil, invalid("items", CodeMissingParameter, "Missing required parameter: 'items'.")
	}
	items, e := ConversationItems("items", raw["items"], key)
	if e == nil && len(items) == 0 {
		return nil, invalid("items", CodeInvalidValue, "Invalid 'items': empty array. Expected at least one item.")
	}
	return items, e
}

// parseObject reads a JSON object body whose parameters are all in names.
func parseObject(data []byte, names ...string) (map[string]json.RawMessage, *Error) {
	var raw map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, jsonError(data, err)
	}
	if raw == nil {
		return nil, invalid("", CodeInvalidJSON, "The request body must be a JSON object.")
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			return nil, invalid(k, CodeUnknownParameter, "Unknown parameter: '%s'.", k)
		}
	}
	return raw, nil
}

// parseMetadata checks OpenAI's metadata limits: at most 16 pairs, keys up
// to 64 characters, values up to 512.
func parseMetadata(v json.RawMessage) (map[string]string, *Error) {
	if isNull(v) {
		return nil, nil
	}
	var md map[string]string
	if json.Unmarshal(v, &md) != nil {
		return nil, invalid("metadata", CodeInvalidType, "Invalid type for 'metadata': expected an object of strings.")
	}
	if len(md) > 16 {
		return nil, invalid("metadata", CodeInvalidValue, "Invalid 'metadata': too many properties (%d > 16).", len(md))
	}
	for k, val := range md {
		if n := utf8.RuneCountInString(k); n > 64 {
			return nil, invalid("metadata", CodeInvalidValue, "Invalid 'metadata': key '%s' is longer than 64 characters (%d).", Clip(k), n)
		}
		if n := utf8.RuneCountInString(val); n > 512 {
			return nil, invalid("metadata", CodeInvalidValue, "Invalid 'metadata': the value of '%s' is longer than 512 characters (%d).", Clip(k), n)
		}
	}
	return md, nil
}

// includable are the include values OpenAI's item endpoints accept.
var includable = map[string]bool{
	"web_search_call.action.sources": true, "code_interpreter_call.outputs": true,
	"computer_call_output.output.image_url": true, "file_search_call.results": true,
	"message.input_image.image_url": true, "message.output_text.logprobs": true,
	"reasoning.encrypted_content": true,
}

// CheckInclude refuses an include value OpenAI does not define. The items
// are stored as they were made, so a valid value changes nothing.
func CheckInclude(values []string) *Error {
	for _, v := range values {
		if !includable[v] {
			return invalid("include", CodeInvalidValue, "Invalid 'include': '%s' is not one of the supported values.", Clip(v))
		}
	}
	return nil
}

// ConversationNotFound is the 404 for an unknown conversation, another
// caller's, or an id that cannot be one.
func ConversationNotFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: ptr(CodeNotFound),
		Message: fmt.Sprintf("Conversation with id '%s' not found.", Clip(id))}
}

// ItemNotFound is the 404 for an item the conversation does not hold.
func ItemNotFound(conv, id string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: ptr(CodeNotFound),
		Message: fmt.Sprintf("Item with id '%s' not found in conversation '%s'.", Clip(id), Clip(conv))}
}

// CodeConversationFull refuses items a conversation can no longer hold.
const CodeConversationFull = "conversation_too_large"

// ConversationFull is the 400 for items that would make the conversation's
// record larger than one NATS message (limit bytes), the most a KV value
// holds.
func ConversationFull(id string, limit int64) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: ptr(CodeConversationFull),
		Message: fmt.Sprintf("Conversation '%s' cannot hold more: its items would exceed %d bytes, the most one stored record holds. Delete items or start a new conversation.", Clip(id), limit)}
}
