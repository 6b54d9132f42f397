package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aptix-dev/aptix/pkg/sealbox"
)

// compactionPrefix marks the encrypted_content of a compaction item Aptix
// made: the summary sealed with the deployment's compaction key
// (pkg/sealbox) and bound to the principal it was made for (authenticated
// data, compactionHolder), so a client can neither read nor alter it, and
// another principal cannot have it opened (an item pasted from someone
// else's output sent their summary to the model). Items with none of the
// Aptix prefixes came from a backend and travel upstream untouched.
const compactionPrefix = "aptix3."

// unboundCompactionPrefix marked an item sealed before items were bound
// to their principal: who it was made for is unknown, so it opens only
// where there is one principal (authentication off) and is refused when
// authentication is on.
const unboundCompactionPrefix = "aptix2."

// legacyCompactionPrefix marked the summary only base64-encoded. Such an
// item is unauthenticated (anyone could have written it) and is refused.
const legacyCompactionPrefix = "aptix1:"

// compactionHolder is the data a compaction item of principal is bound to
// (principal "" is the caller of a deployment without authentication).
func compactionHolder(principal string) []byte { return []byte("principal:" + principal) }

// CompactInstruction asks the model for the summary a compaction item
// carries (AGN-003's "context size growth" risk): whatever a later turn
// needs, nothing else.
const CompactInstruction = "Summarize the conversation so far so that it can continue from your summary alone. " +
	"Keep every fact, decision, open question, file path, identifier and tool result a later turn needs; drop pleasantries. " +
	"Answer with the summary only."

var compactKnown = []string{"model", "input", "instructions", "previous_response_id", "prompt_cache_key",
	"prompt_cache_retention", "prompt_cache_options", "aptix"}

// ParseCompact reads a POST /v1/responses/compact body and returns the
// create request of the turn that asks the model for the summary: the
// client's input items (if any) then the summary instruction, continuing
// previous_response_id (if any).
func ParseCompact(data []byte) (*CreateRequest, *Error) {
	raw, e := parseObject(data, compactKnown...)
	if e != nil {
		return nil, e
	}
	ask, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
		"content": []map[string]string{{"type": "input_text", "text": CompactInstruction}}})
	var items []json.RawMessage
	if v, ok := raw["input"]; ok && !isNull(v) {
		probe := &CreateRequest{}
		if e := probe.parseInput(v); e != nil {
			return nil, e
		}
		items = probe.Input
	}
	if v, ok := raw["model"]; !ok || isNull(v) || string(v) == `""` {
		return nil, invalid("model", CodeMissingParameter, "Missing required parameter: 'model'.")
	}
	if len(items) == 0 && isNull(raw["previous_response_id"]) {
		return nil, invalid("input", CodeMissingParameter, "Missing required parameter: 'input' (or 'previous_response_id').")
	}
	body := map[string]json.RawMessage{"input": mustJSON(append(items, ask))}
	for _, k := range []string{"model", "instructions", "previous_response_id", "prompt_cache_key", "aptix"} {
		if v, ok := raw[k]; ok {
			body[k] = v
		}
	}
	r, e := Parse(mustJSON(body))
	if e != nil {
		return nil, e
	}
	r.CompactedInput = items
	return r, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Compacted is the response.compaction object: the client's user messages
// (as it sent them) followed by one compaction item holding the summary.
// The next request sends that output as its input.
type Compacted struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Output    []json.RawMessage `json:"output"`
	Usage     Usage             `json:"usage"`
}

// Compaction builds the response.compaction object from the summary turn,
// the summary sealed with keys for principal.
func Compaction(id string, createdAt int64, input []json.RawMessage, summary Response, keys *sealbox.Keyring, principal string) Compacted {
	c := Compacted{ID: id, Object: "response.compaction", CreatedAt: createdAt, Output: []json.RawMessage{}}
	for i, it := range input {
		if msg, ok := outputMessage(it, fmt.Sprintf("msg_%s_%d", strings.TrimPrefix(id, "resp_"), i)); ok {
			c.Output = append(c.Output, msg)
		}
	}
	item := map[string]string{"id": "cmp_" + strings.TrimPrefix(id, "resp_"), "type": "compaction", "created_by": "aptix",
		"encrypted_content": keys.SealFor(compactionPrefix, []byte(summary.OutputText()), compactionHolder(principal))}
	c.Output = append(c.Output, mustJSON(item))
	if summary.Usage != nil {
		c.Usage = *summary.Usage
	}
	return c
}

// outputMessage returns a user message item of the input as an output item
// of the Open Responses schema (an id, a status, content as parts), keeping
// its other fields; ok is false for any other item.
func outputMessage(it json.RawMessage, id string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(it, &m) != nil {
		return nil, false
	}
	var typ, role string
	_ = json.Unmarshal(m["type"], &typ)
	_ = json.Unmarshal(m["role"], &role)
	if typ != "message" || role != "user" {
		return nil, false
	}
	var text string
	if json.Unmarshal(m["content"], &text) == nil {
		m["content"] = mustJSON([]map[string]string{{"type": "input_text", "text": text}})
	}
	var have string
	if json.Unmarshal(m["id"], &have) != nil || have == "" {
		m["id"] = mustJSON(id)
	}
	if _, ok := m["status"]; !ok {
		m["status"] = mustJSON("completed")
	}
	return mustJSON(m), true
}

// OpenCompactions returns items with every Aptix compaction item turned
// back into what it stands for, a message carrying the summary, so any
// backend understands it; a backend's own compaction item is left as it
// is. An Aptix item that does not open under keys for principal (altered,
// made for another principal, sealed by a key the deployment no longer
// holds, unbound with authentication on, or the unsealed legacy form) is a
// 400 naming its position in input.
func OpenCompactions(items []json.RawMessage, keys *sealbox.Keyring, principal string) ([]json.RawMessage, *Error) {
	var out []json.RawMessage
	for i, it := range items {
		var m struct {
			Type    string `json:"type"`
			Content string `json:"encrypted_content"`
		}
		if json.Unmarshal(it, &m) != nil || m.Type != "compaction" || !isAptixCompaction(m.Content) {
			if out != nil {
				out = append(out, it)
			}
			continue
		}
		if out == nil {
			out = append(make([]json.RawMessage, 0, len(items)), items[:i]...)
		}
		summary, why := openCompaction(m.Content, keys, principal)
		if why != "" {
			return nil, invalid(fmt.Sprintf("input[%d]", i), CodeInvalidEncryptedContent,
				"The encrypted content of compaction item input[%d] could not be verified: %s.", i, why)
		}
		out = append(out, mustJSON(map[string]any{"type": "message", "role": "user", "content": []map[string]string{
			{"type": "input_text", "text": compactedMark + string(summary)}}}))
	}
	if out == nil {
		return items, nil
	}
	return out, nil
}

func isAptixCompaction(content string) bool {
	return strings.HasPrefix(content, compactionPrefix) || strings.HasPrefix(content, unboundCompactionPrefix) ||
		strings.HasPrefix(content, legacyCompactionPrefix)
}

// openCompaction opens an Aptix item's summary for principal, or says why
// it does not open.
func openCompaction(content string, keys *sealbox.Keyring, principal string) (summary []byte, why string) {
	var err error
	switch {
	case strings.HasPrefix(content, legacyCompactionPrefix):
		return nil, "it is an unsealed compaction item from an older Aptix; compact the conversation again"
	case strings.HasPrefix(content, unboundCompactionPrefix):
		if principal != "" {
			return nil, "it was sealed by an older Aptix before compaction items were bound to their caller; compact the conversation again"
		}
		summary, err = keys.Open(unboundCompactionPrefix, content)
	default:
		summary, err = keys.OpenFor(compactionPrefix, content, compactionHolder(principal))
	}
	switch {
	case errors.Is(err, sealbox.ErrUnknownKey):
		return nil, "it was sealed with a compaction key this deployment no longer holds"
	case err != nil:
		return nil, "it was altered, made for another caller, or is not one this deployment made"
	}
	return summary, ""
}

// compactedMark starts the message a compaction item stands for.
const compactedMark = "[COMPACTED CONVERSATION]\n"

// SealCompactions turns the messages OpenCompactions made back into
// compaction items, sealed again, for a listing of a response's input
// items: the summary stays as opaque there as in the item the client sent,
// and bound to the response's principal as that item was.
func SealCompactions(responseID string, items []json.RawMessage, keys *sealbox.Keyring, principal string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, raw := range items {
		out[i] = raw
		var m struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			ID      string `json:"id"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Type != "message" || m.Role != "user" || m.ID != "" || len(m.Content) != 1 ||
			m.Content[0].Type != "input_text" || !strings.HasPrefix(m.Content[0].Text, compactedMark) {
			continue
		}
		summary := strings.TrimPrefix(m.Content[0].Text, compactedMark)
		out[i] = mustJSON(map[string]string{"id": fmt.Sprintf("cmp_%s_%d", strings.TrimPrefix(responseID, "resp_"), i),
			"type": "compaction", "encrypted_content": keys.SealFor(compactionPrefix, []byte(summary), compactionHolder(principal))})
	}
	return out
}
