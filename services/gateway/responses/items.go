package responses

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// List is OpenAI's list object.
type List struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// InputItems returns a response's input items as GET …/input_items lists
// them: every item with an id (the client's, or one derived from the
// response id and position, so every replica gives the same one) and
// message content as parts.
func InputItems(responseID string, items []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	suffix := strings.TrimPrefix(responseID, "resp_")
	for i, raw := range items {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		if id, _ := m["id"].(string); id == "" {
			prefix := "item"
			if m["type"] == "message" {
				prefix = "msg"
			}
			m["id"] = fmt.Sprintf("%s_%s_%d", prefix, suffix, i)
		}
		if s, ok := m["content"].(string); ok && m["type"] == "message" {
			part := "input_text"
			if m["role"] == "assistant" {
				part = "output_text"
			}
			m["content"] = []any{map[string]any{"type": part, "text": s}}
		}
		if _, ok := m["status"]; !ok && m["type"] == "message" {
			m["status"] = "completed"
		}
		b, _ := json.Marshal(m)
		out = append(out, b)
	}
	return out
}

// Page applies OpenAI's list parameters: limit (1–100, default 20), order
// (asc or desc, default desc: newest first) and after (an item id: the page
// starts after it).
func Page(items []json.RawMessage, limit, order, after string) (List, *Error) {
	n := 20
	if limit != "" {
		v, err := strconv.Atoi(limit)
		if err != nil || v < 1 || v > 100 {
			return List{}, invalid("limit", CodeInvalidValue, "Invalid 'limit': expected an integer between 1 and 100, got '%s'.", limit)
		}
		n = v
	}
	ordered := append([]json.RawMessage{}, items...)
	switch order {
	case "", "desc":
		for i, j := 0, len(ordered)-1; i < j; i, j = i+1, j-1 {
			ordered[i], ordered[j] = ordered[j], ordered[i]
		}
	case "asc":
	default:
		return List{}, invalid("order", CodeInvalidValue, "Invalid 'order': expected 'asc' or 'desc', got '%s'.", order)
	}
	if after != "" {
		found := false
		for i, it := range ordered {
			if itemID(it) == after {
				ordered, found = ordered[i+1:], true
				break
			}
		}
		if !found {
			return List{}, invalid("after", CodeInvalidValue, "Invalid 'after': no item with id '%s'.", after)
		}
	}
	l := List{Object: "list", Data: ordered, HasMore: len(ordered) > n}
	if l.HasMore {
		l.Data = ordered[:n]
	}
	if len(l.Data) > 0 {
		first, last := itemID(l.Data[0]), itemID(l.Data[len(l.Data)-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l, nil
}

func itemID(raw json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.ID
}
