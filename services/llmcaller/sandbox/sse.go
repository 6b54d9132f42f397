package sandbox

import (
	json "github.com/go-json-experiment/json/v1"
	"net/http"
	"strings"
	"unicode/utf8"
)

// sse writes Responses API stream events with a monotonically increasing
// sequence_number, flushing each one so a client sees deltas as they come.
type sse struct {
	w   http.ResponseWriter
	fl  http.Flusher
	seq int
}

func (e *sse) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	_, _ = e.w.Write([]byte("event: " + typ + "\ndata: "))
	_, _ = e.w.Write(b)
	_, _ = e.w.Write([]byte("\n\n"))
	if e.fl != nil {
		e.fl.Flush()
	}
}

// chunks splits s into small pieces (a few words each) to stream as deltas.
func chunks(s string, words int) []string {
	parts := strings.SplitAfter(s, " ")
	var out []string
	for i := 0; i < len(parts); i += words {
		out = append(out, strings.Join(parts[i:min(i+words, len(parts))], ""))
	}
	return out
}

// byteChunks splits s into n-byte pieces on rune boundaries (arguments have no spaces).
func byteChunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		cut := truncate(s, n)
		if cut == "" {
			_, size := utf8.DecodeRuneInString(s)
			cut = s[:size]
		}
		out = append(out, cut)
		s = s[len(cut):]
	}
	return out
}

// emitter receives stream events in order: the SSE writer of a plain
// streamed response, or the event log of a background one (background.go).
type emitter interface {
	emit(typ string, fields map[string]any)
}

// stream replays a finished response as the event sequence OpenAI sends.
func (s *Server) stream(w http.ResponseWriter, resp response, streamError bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	e := &sse{w: w, fl: fl}
	e.emit("response.created", map[string]any{"response": started(resp, "in_progress")})
	streamEvents(e, resp, streamError)
	e.done()
}

// doneLine ends every event stream, after its terminal event (or its error
// event): Open Responses' terminal sentinel, which openai-go also reads as
// the end. It has no "event:" line and is not an event.
const doneLine = "data: [DONE]\n\n"

func (e *sse) done() {
	_, _ = e.w.Write([]byte(doneLine))
	if e.fl != nil {
		e.fl.Flush()
	}
}

// started is resp as it looks before any output: the snapshot the opening
// events carry.
func started(resp response, status string) response {
	start := resp
	start.Status, start.Output, start.Usage, start.IncompleteDetails, start.CompletedAt = status, []any{}, nil, nil, nil
	return start
}

// streamEvents emits everything after response.created: in_progress, every
// item's lifecycle and deltas, and the terminal event (or, with streamError,
// an error event in its place).
func streamEvents(e emitter, resp response, streamError bool) {
	start := started(resp, "in_progress")
	if streamError {
		// OpenAI's shape: code/message at the top level. The Open Responses
		// schema nests them under "error", but openai-go turns any event
		// with an "error" key into a stream failure, so the sandbox keeps
		// OpenAI's (a fault injection, never part of a conformance run).
		e.emit("error", map[string]any{"code": "server_error", "message": "sandbox fault: stream-error", "param": nil})
		return
	}
	e.emit("response.in_progress", map[string]any{"response": start})

	for idx, it := range resp.Output {
		switch v := it.(type) {
		case messageItem:
			added := v
			added.Status, added.Content = "in_progress", []outputText{}
			e.emit("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			for ci, p := range v.Content {
				empty := newOutputText("")
				e.emit("response.content_part.added", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "part": empty})
				for _, d := range chunks(p.Text, 3) {
					e.emit("response.output_text.delta", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "delta": d, "logprobs": []any{}})
				}
				e.emit("response.output_text.done", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "text": p.Text, "logprobs": []any{}})
				e.emit("response.content_part.done", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "part": p})
			}
			e.emit("response.output_item.done", map[string]any{"output_index": idx, "item": v})
		case functionCallItem:
			added := v
			added.Status, added.Arguments = "in_progress", ""
			e.emit("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			for _, d := range byteChunks(v.Arguments, 8) {
				e.emit("response.function_call_arguments.delta", map[string]any{"item_id": v.ID, "output_index": idx, "delta": d})
			}
			e.emit("response.function_call_arguments.done", map[string]any{"item_id": v.ID, "output_index": idx, "name": v.Name, "arguments": v.Arguments})
			e.emit("response.output_item.done", map[string]any{"output_index": idx, "item": v})
		case compactionItem: // context_management's inline compaction: whole at once
			e.emit("response.output_item.added", map[string]any{"output_index": idx, "item": v})
			e.emit("response.output_item.done", map[string]any{"output_index": idx, "item": v})
		}
	}
	final := "response.completed"
	switch resp.Status {
	case "incomplete":
		final = "response.incomplete"
	case "failed":
		final = "response.failed"
	}
	e.emit(final, map[string]any{"response": resp})
}
