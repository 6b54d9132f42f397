package responses

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Delta is one live piece of a streamed turn, as the LLM caller publishes it
// on aptix.delta.<conversation>.<turn> (services/llmcaller/caller/deltas.go):
// Type text or arguments (done deltas are ignored: the completion is the
// record), ItemID the upstream output item, CallID/Name for a call.
type Delta struct {
	Type   string `json:"type"`
	ItemID string `json:"itemId,omitempty"`
	CallID string `json:"callId,omitempty"`
	Name   string `json:"name,omitempty"`
	Text   string `json:"text,omitempty"`
	// UpstreamSeq numbers the upstream event a delta came from when the LLM
	// caller re-attaches: after a crash it relays the call again
	// from the start, and the streamer drops what it has already shown.
	UpstreamSeq int `json:"upstreamSeq,omitempty"`
	// Round is the tool loop's round of the call that sent the delta; a new
	// round numbers its upstream events afresh.
	Round int `json:"round,omitempty"`
	// Item is a whole output item of the server-side tool loop (types
	// mcp_list_tools, mcp_call when a call starts, mcp_call_done when it
	// ends), published by the toolrunner.
	Item json.RawMessage `json:"item,omitempty"`
	// Sources are, on a retrieval delta (the turn's retrieval done, before
	// the model is called), the chunks the context block holds; Text is
	// the query.
	Sources []contracts.SourceRef `json:"sources,omitempty"`
}

// Event is one Server-Sent Event of a streamed response: Type is both the
// SSE `event:` line and the JSON `type`; Data holds the other fields.
type Event struct {
	Type string
	Seq  int
	Data map[string]any
}

// MarshalJSON writes the event's JSON with type and sequence_number first,
// as OpenAI does, so a reader of the raw stream sees what each line is.
func (e Event) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		Type string `json:"type"`
		Seq  int    `json:"sequence_number"`
	}{e.Type, e.Seq})
	if err != nil || len(e.Data) == 0 {
		return head, err
	}
	rest, err := json.Marshal(e.Data)
	if err != nil {
		return nil, err
	}
	// head is {…} and rest is {…}: join them into one object.
	return append(append(head[:len(head)-1], ','), rest[1:]...), nil
}

// Streamer turns live deltas and the final response into OpenAI's event
// sequence (Open Responses' rules: every event has type and an increasing
// sequence_number; an item is added before its content parts, its deltas
// and its done events; the terminal event carries the whole response).
// Items keep the upstream's item ids, so the live events and the final
// output agree; only the response id is Aptix's.
type Streamer struct {
	seq   int
	items []*liveItem
	byID  map[string]*liveItem
	// lastUp is the highest UpstreamSeq shown in round.
	lastUp, round int
	// meta is the response's, once FileSearch opened its item.
	meta Meta
}

type liveItem struct {
	index  int
	id     string
	kind   string // message | function_call
	callID string
	name   string
	text   []byte
	done   bool
}

// NewStreamer starts a stream.
func NewStreamer() *Streamer { return &Streamer{byID: map[string]*liveItem{}} }

// ev numbers events from 0, as OpenAI does.
func (s *Streamer) ev(typ string, data map[string]any) Event {
	e := Event{Type: typ, Seq: s.seq, Data: data}
	s.seq++
	return e
}

// Start returns response.created and response.in_progress for the response
// as it stands (status in_progress, no output yet).
func (s *Streamer) Start(r Response) []Event {
	r.Status = StatusInProgress
	r.Output = []json.RawMessage{}
	r.Usage, r.CompletedAt = nil, nil
	return []Event{s.ev("response.created", map[string]any{"response": r}),
		s.ev("response.in_progress", map[string]any{"response": r})}
}

// Queued returns response.queued, the first event of a background stream.
func (s *Streamer) Queued(r Response) []Event {
	r.Status = StatusQueued
	r.Output = []json.RawMessage{}
	r.Usage, r.CompletedAt = nil, nil
	return []Event{s.ev("response.queued", map[string]any{"response": r})}
}

// InProgress returns response.in_progress for a background stream once
// the turn has started.
func (s *Streamer) InProgress(r Response) []Event {
	r.Status = StatusInProgress
	r.Output = []json.RawMessage{}
	r.Usage, r.CompletedAt = nil, nil
	return []Event{s.ev("response.in_progress", map[string]any{"response": r})}
}

// Delta returns the events for one live delta: the item (and content part)
// added on its first delta, then the text or arguments delta.
func (s *Streamer) Delta(d Delta) []Event {
	if d.Type == DeltaRetrieval {
		return s.retrieved(d) // filesearchstream.go
	}
	if d.Round > s.round {
		s.round, s.lastUp = d.Round, 0
	} else if d.Round < s.round {
		return nil // an earlier round's call relayed again after a crash
	}
	if d.UpstreamSeq > 0 {
		if d.UpstreamSeq <= s.lastUp {
			return nil // a re-attached call relaying what was already shown
		}
		s.lastUp = d.UpstreamSeq
	}
	var out []Event
	if len(d.Item) > 0 {
		return s.toolItem(d)
	}
	it := s.byID[d.ItemID]
	switch d.Type {
	case "text":
		if it == nil {
			it = s.add(d.ItemID, "message", "", "")
			out = append(out, s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": it.item("in_progress")}),
				s.ev("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": textPart("")}))
		}
		it.text = append(it.text, d.Text...)
		out = append(out, s.ev("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "delta": d.Text, "logprobs": []any{}}))
	case "arguments":
		if it == nil {
			it = s.add(d.ItemID, "function_call", d.CallID, d.Name)
			out = append(out, s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": it.item("in_progress")}))
		}
		it.text = append(it.text, d.Text...)
		out = append(out, s.ev("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": d.Text}))
	}
	return out
}

func (s *Streamer) add(id, kind, callID, name string) *liveItem {
	it := &liveItem{index: len(s.items), id: id, kind: kind, callID: callID, name: name}
	s.items = append(s.items, it)
	if id != "" {
		s.byID[id] = it
	}
	return it
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// item is the live item as the added (or, for an item the final output
// lacks, done) event shows it.
func (it *liveItem) item(status string) map[string]any {
	if it.kind == "function_call" {
		return map[string]any{"id": it.id, "type": "function_call", "status": status, "call_id": it.callID, "name": it.name, "arguments": string(it.text)}
	}
	content := []any{}
	if status != "in_progress" {
		content = append(content, textPart(string(it.text)))
	}
	return map[string]any{"id": it.id, "type": "message", "status": status, "role": "assistant", "content": content}
}

// Finish closes every item against the final response (its output items
// are the record: a live item's done events carry the final text) and ends
// with response.completed, response.incomplete or response.failed. Items the
// live stream never showed (a call the backend sent whole) are added and
// done here, so a client that only reads events still sees all of them.
func (s *Streamer) Finish(r Response) []Event {
	var out []Event
	final := map[string]bool{}
	for _, raw := range r.Output {
		var head struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(raw, &head)
		final[head.ID] = true
		it := s.byID[head.ID]
		if isToolItem(head.Type) {
			out = append(out, s.finishToolItem(it, head.ID, raw)...)
			continue
		}
		if head.Type == "file_search_call" {
			out = append(out, s.finishFileSearch(it, head.ID, raw)...)
			continue
		}
		if it == nil || it.done || it.kind != head.Type {
			// Not streamed live: added, its parts, done.
			it = s.add(head.ID, head.Type, head.CallID, head.Name)
			added := map[string]any{}
			_ = json.Unmarshal(raw, &added)
			if _, ok := added["status"]; ok {
				// An item whose type has a status is shown starting; one
				// without (mcp_approval_request, compaction) is not given one.
				added["status"] = "in_progress"
			}
			switch head.Type {
			case "message":
				added["content"] = []any{}
			case "function_call":
				added["arguments"] = ""
			}
			out = append(out, s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": added}))
			if head.Type == "function_call" && head.Arguments != "" {
				// One delta with the whole arguments: the deltas add up to the done event's.
				out = append(out, s.ev("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": head.Arguments}))
			}
			if head.Type == "message" {
				for ci, c := range head.Content {
					part := textPart("")
					part["type"] = c.Type
					out = append(out, s.ev("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": ci, "part": part}))
					if c.Type == "output_text" && c.Text != "" {
						out = append(out, s.ev("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": ci, "delta": c.Text, "logprobs": []any{}}))
					}
				}
			}
		}
		it.done = true
		switch head.Type {
		case "message":
			var parts []map[string]any
			var full struct {
				Content []map[string]any `json:"content"`
			}
			_ = json.Unmarshal(raw, &full)
			parts = full.Content
			for ci, c := range head.Content {
				if c.Type == "output_text" {
					out = append(out, s.ev("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": ci, "text": c.Text, "logprobs": []any{}}))
				}
				out = append(out, s.ev("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": ci, "part": parts[ci]}))
			}
		case "function_call":
			out = append(out, s.ev("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index, "name": head.Name, "arguments": head.Arguments}))
		}
		out = append(out, s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": raw}))
	}
	// A live item the final output lacks (e.g. text a tool-emulating caller
	// held back) is closed as it stood, so no item is left open.
	for _, it := range s.items {
		if it.done || final[it.id] {
			continue
		}
		it.done = true
		if it.kind == "message" {
			out = append(out, s.ev("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "text": string(it.text), "logprobs": []any{}}),
				s.ev("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": textPart(string(it.text))}))
		}
		out = append(out, s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": it.item("incomplete")}))
	}
	terminal := "response.completed"
	switch r.Status {
	case StatusIncomplete:
		terminal = "response.incomplete"
	case StatusFailed:
		terminal = "response.failed"
	case StatusCancelled:
		terminal = "response.cancelled"
	}
	return append(out, s.ev(terminal, map[string]any{"response": r}))
}
