package responses

import "encoding/json"

// The server-side tool loop's items in a stream (OpenAI's event names):
// mcp_list_tools → output_item.added, response.mcp_list_tools.in_progress,
// .completed|.failed, output_item.done; mcp_call → output_item.added,
// response.mcp_call_arguments.delta/.done, response.mcp_call.in_progress,
// then, when it ends, response.mcp_call.completed|.failed and output_item.done.

func isToolItem(typ string) bool { return typ == "mcp_list_tools" || typ == "mcp_call" }

type toolHead struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Arguments string          `json:"arguments"`
	Status    string          `json:"status"`
	Error     json.RawMessage `json:"error"`
}

// toolItem returns the events of a live tool loop delta.
func (s *Streamer) toolItem(d Delta) []Event {
	var h toolHead
	if json.Unmarshal(d.Item, &h) != nil || h.ID == "" {
		return nil
	}
	it := s.byID[h.ID]
	switch d.Type {
	case "mcp_list_tools":
		if it != nil {
			return nil
		}
		return s.listTools(s.add(h.ID, h.Type, "", ""), d.Item, h)
	case "mcp_call":
		if it != nil {
			return nil
		}
		return s.callStarted(s.add(h.ID, h.Type, "", ""), d.Item, h)
	case "mcp_call_done":
		if it == nil || it.done {
			return nil
		}
		return s.callEnded(it, d.Item, h)
	}
	return nil
}

func (s *Streamer) listTools(it *liveItem, raw json.RawMessage, h toolHead) []Event {
	it.done = true
	added := withStatus(raw, "in_progress")
	end := "response.mcp_list_tools.completed"
	if len(h.Error) > 0 && string(h.Error) != "null" {
		end = "response.mcp_list_tools.failed"
	}
	return []Event{
		s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": added}),
		s.ev("response.mcp_list_tools.in_progress", map[string]any{"item_id": it.id, "output_index": it.index}),
		s.ev(end, map[string]any{"item_id": it.id, "output_index": it.index}),
		s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": raw}),
	}
}

func (s *Streamer) callStarted(it *liveItem, raw json.RawMessage, h toolHead) []Event {
	added := withStatus(raw, "in_progress")
	return []Event{
		s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": added}),
		s.ev("response.mcp_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": h.Arguments}),
		s.ev("response.mcp_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index, "arguments": h.Arguments}),
		s.ev("response.mcp_call.in_progress", map[string]any{"item_id": it.id, "output_index": it.index}),
	}
}

func (s *Streamer) callEnded(it *liveItem, raw json.RawMessage, h toolHead) []Event {
	it.done = true
	end := "response.mcp_call.completed"
	if h.Status == "failed" {
		end = "response.mcp_call.failed"
	}
	return []Event{
		s.ev(end, map[string]any{"item_id": it.id, "output_index": it.index}),
		s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": raw}),
	}
}

// finishToolItem closes a tool loop item against the final output: the
// events it still lacks (all of them when the live stream never showed it).
func (s *Streamer) finishToolItem(it *liveItem, id string, raw json.RawMessage) []Event {
	var h toolHead
	_ = json.Unmarshal(raw, &h)
	switch {
	case it != nil && it.done:
		return nil
	case it != nil:
		return s.callEnded(it, raw, h)
	case h.Type == "mcp_list_tools":
		return s.listTools(s.add(id, h.Type, "", ""), raw, h)
	}
	it = s.add(id, h.Type, "", "")
	return append(s.callStarted(it, raw, h), s.callEnded(it, raw, h)...)
}

func withStatus(raw json.RawMessage, status string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	if m["type"] == "mcp_call" {
		m["status"] = status
		m["output"], m["error"] = nil, nil
	}
	return m
}
