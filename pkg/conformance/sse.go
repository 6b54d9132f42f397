package conformance

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Event is one Server-Sent Event of a response stream, as sent.
type Event struct {
	// Name is the SSE "event:" field ("" when the server sent none).
	Name string
	// Data is the JSON payload.
	Data json.RawMessage
	// Type and Seq are the payload's "type" and "sequence_number".
	Type string
	Seq  int64
}

// Stream is a whole response stream, read to its end.
type Stream struct {
	Events []Event
	// Final is the response of the terminal event (response.completed,
	// response.incomplete or response.failed), nil when there was none.
	Final json.RawMessage
	// Done is whether the stream ended with the "data: [DONE]" sentinel,
	// the terminal SSE event Open Responses requires.
	Done bool
}

// ReadSSE reads a text/event-stream body to its end and checks the framing
// rules of Open Responses: every event has an "event:" line equal to the
// payload's "type", a JSON payload with a "sequence_number" that strictly
// increases, and a "data: [DONE]" sentinel, if any, only at the end.
// It returns what it read even when a rule is broken.
func ReadSSE(r io.Reader) (Stream, error) {
	var st Stream
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 32<<20)
	var name string
	var data []string
	done := false
	flush := func() {
		defer func() { name, data = "", nil }()
		if len(data) == 0 {
			return
		}
		payload := strings.Join(data, "\n")
		if payload == "[DONE]" {
			done, st.Done = true, true
			return
		}
		if done {
			errs = append(errs, errors.New("event after data: [DONE]"))
		}
		ev := Event{Name: name, Data: json.RawMessage(payload)}
		var head struct {
			Type string `json:"type"`
			Seq  *int64 `json:"sequence_number"`
		}
		if err := json.Unmarshal(ev.Data, &head); err != nil {
			errs = append(errs, fmt.Errorf("event %d: data is not JSON: %w", len(st.Events), err))
			st.Events = append(st.Events, ev)
			return
		}
		ev.Type = head.Type
		switch {
		case head.Type == "":
			errs = append(errs, fmt.Errorf("event %d: no type", len(st.Events)))
		case name == "":
			errs = append(errs, fmt.Errorf("event %d (%s): no event: line", len(st.Events), head.Type))
		case name != head.Type:
			errs = append(errs, fmt.Errorf("event %d: event: line %q differs from type %q", len(st.Events), name, head.Type))
		}
		if head.Seq == nil {
			errs = append(errs, fmt.Errorf("event %d (%s): no sequence_number", len(st.Events), head.Type))
		} else {
			ev.Seq = *head.Seq
			if n := len(st.Events); n > 0 && ev.Seq <= st.Events[n-1].Seq {
				errs = append(errs, fmt.Errorf("event %d (%s): sequence_number %d after %d", n, head.Type, ev.Seq, st.Events[n-1].Seq))
			}
		}
		switch head.Type {
		case "response.completed", "response.incomplete", "response.failed":
			var term struct {
				Response json.RawMessage `json:"response"`
			}
			if json.Unmarshal(ev.Data, &term) == nil {
				st.Final = term.Response
			}
		}
		st.Events = append(st.Events, ev)
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, ":"):
			// a comment (keep-alive)
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read stream: %w", err))
	}
	return st, errors.Join(errs...)
}

// CheckEvents validates every event against the schema of its type.
func (v *Validator) CheckEvents(st Stream) error {
	var errs []error
	for i, ev := range st.Events {
		if err := v.Event(ev.Data); err != nil {
			errs = append(errs, fmt.Errorf("event %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// lifecycle payload fields the ordering rules read.
type evFields struct {
	OutputIndex  *int            `json:"output_index"`
	ContentIndex *int            `json:"content_index"`
	ItemID       string          `json:"item_id"`
	Item         json.RawMessage `json:"item"`
	Delta        string          `json:"delta"`
	Text         string          `json:"text"`
	Arguments    string          `json:"arguments"`
	Part         struct {
		Type string `json:"type"`
	} `json:"part"`
}

// itemState follows one output item through the stream.
type itemState struct {
	id, typ    string
	done       json.RawMessage // the output_item.done item
	parts      map[int]*partState
	partsOrder []int
	args       strings.Builder
	argsDone   bool
}

// partState follows one content part of a message item.
type partState struct {
	textDone, done bool
	text           strings.Builder
}

// CheckLifecycle checks the order rules of a stream: it starts with
// response.created (response.queued first for a background response), then
// response.in_progress; exactly one terminal event comes last; each output
// item is added (at the next output_index) before its parts and deltas and is
// done after them; each content part is added before its text deltas, its
// text is done before the part is done; the deltas add up to the done text
// and arguments; and the items of the output_item.done events are the final
// response's output, in order.
func CheckLifecycle(st Stream) error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(st.Events) == 0 {
		return errors.New("no events")
	}
	types := make([]string, len(st.Events))
	for i, ev := range st.Events {
		types[i] = ev.Type
	}
	start := 0
	if types[0] == "response.queued" {
		start = 1
	}
	if len(types) <= start+1 || types[start] != "response.created" || types[start+1] != "response.in_progress" {
		fail("stream must start with response.created then response.in_progress, got %v", head(types, 3))
	}
	terminals := 0
	for i, t := range types {
		switch t {
		case "response.completed", "response.incomplete", "response.failed":
			terminals++
			if i != len(types)-1 {
				fail("terminal event %s at %d is not the last event", t, i)
			}
		}
	}
	if terminals != 1 {
		fail("want exactly one terminal event, got %d", terminals)
	}
	items := map[int]*itemState{}
	next := 0
	for i, ev := range st.Events {
		var f evFields
		_ = json.Unmarshal(ev.Data, &f)
		if f.OutputIndex == nil {
			continue
		}
		oi := *f.OutputIndex
		it := items[oi]
		if ev.Type == "response.output_item.added" {
			if it != nil {
				fail("event %d: output_index %d added twice", i, oi)
				continue
			}
			if oi != next {
				fail("event %d: output_item.added at output_index %d, want %d", i, oi, next)
			}
			next = oi + 1
			var head struct{ ID, Type string }
			_ = json.Unmarshal(f.Item, &head)
			items[oi] = &itemState{id: head.ID, typ: head.Type, parts: map[int]*partState{}}
			continue
		}
		if it == nil {
			fail("event %d (%s): output_index %d before its output_item.added", i, ev.Type, oi)
			continue
		}
		if it.done != nil {
			fail("event %d (%s): output_index %d after its output_item.done", i, ev.Type, oi)
		}
		if f.ItemID != "" && f.ItemID != it.id {
			fail("event %d (%s): item_id %q, but output_index %d is item %q", i, ev.Type, f.ItemID, oi, it.id)
		}
		ci := -1
		if f.ContentIndex != nil {
			ci = *f.ContentIndex
		}
		p := it.parts[ci]
		switch ev.Type {
		case "response.content_part.added":
			if p != nil {
				fail("event %d: content part %d of item %d added twice", i, ci, oi)
				continue
			}
			it.parts[ci] = &partState{}
			it.partsOrder = append(it.partsOrder, ci)
		case "response.output_text.delta", "response.refusal.delta":
			if p == nil {
				fail("event %d (%s): content part %d of item %d not added", i, ev.Type, ci, oi)
				continue
			}
			if p.textDone {
				fail("event %d: delta after output_text.done", i)
			}
			p.text.WriteString(f.Delta)
		case "response.output_text.done":
			if p == nil {
				fail("event %d: output_text.done for a part never added", i)
				continue
			}
			p.textDone = true
			if p.text.String() != f.Text {
				fail("event %d: output_text.done text %q differs from its deltas %q", i, f.Text, p.text.String())
			}
		case "response.content_part.done":
			if p == nil {
				fail("event %d: content_part.done for a part never added", i)
				continue
			}
			if !p.textDone && f.Part.Type == "output_text" {
				fail("event %d: content_part.done before output_text.done", i)
			}
			p.done = true
		case "response.function_call_arguments.delta":
			if it.argsDone {
				fail("event %d: arguments delta after arguments done", i)
			}
			it.args.WriteString(f.Delta)
		case "response.function_call_arguments.done":
			it.argsDone = true
			if it.args.String() != f.Arguments {
				fail("event %d: arguments done %q differ from deltas %q", i, f.Arguments, it.args.String())
			}
		case "response.output_item.done":
			for _, c := range it.partsOrder {
				if !it.parts[c].done {
					fail("event %d: output_item.done before content_part.done of part %d", i, c)
				}
			}
			if it.typ == "function_call" && !it.argsDone {
				fail("event %d: function_call item done before function_call_arguments.done", i)
			}
			it.done = f.Item
		}
	}
	for oi, it := range items {
		if it.done == nil {
			fail("output_index %d never done", oi)
		}
	}
	if st.Final == nil {
		return errors.Join(errs...)
	}
	var final struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(st.Final, &final); err != nil {
		fail("terminal response: %v", err)
		return errors.Join(errs...)
	}
	if len(final.Output) != len(items) {
		fail("final response has %d output items, the stream added %d", len(final.Output), len(items))
	}
	for oi, raw := range final.Output {
		if it := items[oi]; it != nil && it.done != nil && !sameJSON(raw, it.done) {
			fail("final output[%d] differs from its output_item.done item:\n final %s\n done  %s", oi, raw, it.done)
		}
	}
	return errors.Join(errs...)
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }

// sameJSON compares two JSON documents by value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
