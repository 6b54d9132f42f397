package messages

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Event is one server-sent event of a Messages stream: its name and data.
type Event struct {
	Name string
	Data any
}

// Ping is the event sent while the model has not answered yet.
func Ping() Event { return Event{"ping", map[string]string{"type": "ping"}} }

// Streamer turns a response's Responses events (the gateway's
// responses.Streamer's, from the live deltas and the completion) into
// Anthropic's event sequence: message_start; each block's
// content_block_start, deltas (text_delta, input_json_delta,
// thinking_delta, signature_delta) and content_block_stop; message_delta
// with the stop_reason and usage; message_stop.
//
// Text and tool input stream live. Thinking is not among the turn's live
// deltas, so a stream that may answer thinking blocks (hold: thinking on an
// Anthropic backend) sends every block from the whole answer at its end,
// in the model's order (thinking first, as a client must send them back);
// pings keep the connection alive meanwhile.
// Blocks the live stream did not show are sent at the end likewise.
type Streamer struct {
	id, model string
	hold      bool
	index     int    // the next block's index
	open      string // the output item id of the open block, "" when none
	shown     map[string]bool
}

// NewStreamer starts the events of the response with Aptix id responseID.
func NewStreamer(responseID, model string, hold bool) *Streamer {
	return &Streamer{id: ID(responseID), model: model, hold: hold, shown: map[string]bool{}}
}

// Start is message_start.
func (s *Streamer) Start() Event {
	return Event{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.id, "type": "message", "role": "assistant", "model": s.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": Usage{}}}}
}

func (s *Streamer) startBlock(itemID string, b any) Event {
	s.open = itemID
	s.shown[itemID] = true
	return Event{"content_block_start", map[string]any{"type": "content_block_start", "index": s.index, "content_block": b}}
}

func (s *Streamer) delta(d map[string]any) Event {
	return Event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": s.index, "delta": d}}
}

func (s *Streamer) stopBlock() []Event {
	if s.open == "" {
		return nil
	}
	ev := Event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": s.index}}
	s.open = ""
	s.index++
	return []Event{ev}
}

// Events returns what evs add; end says the terminal event was seen.
func (s *Streamer) Events(evs []responses.Event) (out []Event, end bool) {
	for _, ev := range evs {
		switch ev.Type {
		case "response.output_text.delta":
			if s.hold {
				continue
			}
			itemID, _ := ev.Data["item_id"].(string)
			d, _ := ev.Data["delta"].(string)
			if s.open != itemID {
				out = append(out, s.stopBlock()...)
				out = append(out, s.startBlock(itemID, textBlock{"text", ""}))
			}
			if d != "" {
				out = append(out, s.delta(map[string]any{"type": "text_delta", "text": d}))
			}
		case "response.output_item.added":
			item, _ := ev.Data["item"].(map[string]any)
			if t, _ := item["type"].(string); t != "function_call" || s.hold {
				continue
			}
			itemID, _ := item["id"].(string)
			callID, _ := item["call_id"].(string)
			name, _ := item["name"].(string)
			out = append(out, s.stopBlock()...)
			out = append(out, s.startBlock(itemID, toolUseBlock{"tool_use", callID, name, json.RawMessage("{}")}))
		case "response.function_call_arguments.delta":
			itemID, _ := ev.Data["item_id"].(string)
			d, _ := ev.Data["delta"].(string)
			if itemID == s.open && d != "" {
				out = append(out, s.delta(map[string]any{"type": "input_json_delta", "partial_json": d}))
			}
		case "response.completed", "response.incomplete", "response.failed", "response.cancelled":
			r, _ := ev.Data["response"].(responses.Response)
			return append(out, s.finish(r)...), true
		}
	}
	return out, false
}

// finish closes the open block, sends the blocks not shown live, then
// message_delta and message_stop; a failed response ends in an error event.
func (s *Streamer) finish(r responses.Response) []Event {
	out := s.stopBlock()
	if e := Failed(r); e != nil {
		_, body := ErrorBody(e)
		return append(out, Event{"error", body})
	}
	all, allIDs, _ := contentOf(r)
	blocks, ids := blocksOnly(all, allIDs)
	for i, b := range blocks {
		if s.shown[ids[i]] {
			continue
		}
		switch b := b.(type) {
		case textBlock:
			out = append(out, s.startBlock(ids[i], textBlock{"text", ""}))
			if b.Text != "" {
				out = append(out, s.delta(map[string]any{"type": "text_delta", "text": b.Text}))
			}
		case toolUseBlock:
			out = append(out, s.startBlock(ids[i], toolUseBlock{"tool_use", b.ID, b.Name, json.RawMessage("{}")}))
			out = append(out, s.delta(map[string]any{"type": "input_json_delta", "partial_json": string(b.Input)}))
		case thinkingBlock:
			out = append(out, s.startBlock(ids[i], thinkingBlock{"thinking", "", ""}))
			if b.Thinking != "" {
				out = append(out, s.delta(map[string]any{"type": "thinking_delta", "thinking": b.Thinking}))
			}
			out = append(out, s.delta(map[string]any{"type": "signature_delta", "signature": b.Signature}))
		case redactedBlock:
			out = append(out, s.startBlock(ids[i], b))
		}
		out = append(out, s.stopBlock()...)
		s.shown[ids[i]] = false // an item with several blocks (text parts) shows each
	}
	u := UsageOf(r)
	out = append(out, Event{"message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": StopReason(r), "stop_sequence": StopSequence(r)}, "usage": u}})
	return append(out, Event{"message_stop", map[string]any{"type": "message_stop"}})
}
