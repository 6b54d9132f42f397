package responses

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Ids a client chooses for conversation items become path segments
// (GET and DELETE /v1/conversations/{id}/items/{item_id}) and the
// listing's cursor (after=): an id such as "../x" or one with a slash can
// never be read or deleted, and a second item with an id shadows the first.
// So a client's id is 1-128 characters of [A-Za-z0-9_-] (what Aptix and
// OpenAI ids are made of) and unique within its conversation. Ids Aptix
// gives (msg_<response>_<n>) and the model's output ids are not the
// client's and are not checked here.

// CheckItemIDs checks the ids of items (the client's, before InputItems
// gives the others theirs): each a token, none twice. param names the
// array ("items", "input").
func CheckItemIDs(param string, items []json.RawMessage) *Error {
	seen := make(map[string]bool, len(items))
	for i, raw := range items {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(raw, &m) != nil || len(m.ID) == 0 || isNull(m.ID) {
			continue
		}
		var id string
		p := fmt.Sprintf("%s[%d].id", param, i)
		if json.Unmarshal(m.ID, &id) != nil {
			return invalid(p, CodeInvalidType, "Invalid type for '%s': expected a string.", p)
		}
		if !contracts.IsToken(id) {
			return invalid(p, CodeInvalidValue, "Invalid '%s': an item id must be 1 to %d characters of letters, digits, '_' and '-'.", p, contracts.MaxIDLen)
		}
		if seen[id] {
			return DuplicateItem(id)
		}
		seen[id] = true
	}
	return nil
}

// DuplicateItem is the 400 of an item whose id the conversation (or the
// same request) already has, in OpenAI's words.
func DuplicateItem(id string) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Code: ptr(CodeInvalidValue),
		Message: fmt.Sprintf("Duplicate item found with id %s. Remove the duplicate item from your input and try again.", id)}
}

// TakenID is the id of one of items already in the conversation, "" when
// none is: what a new item would shadow.
func (c *Conversation) TakenID(items []json.RawMessage) string {
	have := map[string]bool{}
	for _, it := range c.Items() {
		have[itemID(it)] = true
	}
	for _, it := range items {
		if id := itemID(it); id != "" && have[id] {
			return id
		}
	}
	return ""
}
