package anthropicmessages

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Stream translates a Messages event stream into the Responses events the
// caller reads, written as SSE to w: response.created at message_start;
// for a text block its message item added and its text deltas; for a
// tool_use block its function_call added and its input_json deltas as
// argument deltas; each item done at content_block_stop; at message_stop
// the terminal event with the whole response, built by the same rules as
// Response from the message the events added up to (thinking blocks with
// their signatures included), so a streamed turn and a plain one store the
// same body. A Messages error event becomes an error event.
type Stream struct {
	w    io.Writer
	seq  int
	msg  Message
	open map[int]*liveBlock
	werr error
}

type liveBlock struct {
	typ  string
	buf  bytes.Buffer // text, thinking or partial JSON
	sig  bytes.Buffer
	head block
}

// NewStream returns a translator writing to w.
func NewStream(w io.Writer) *Stream { return &Stream{w: w, open: map[int]*liveBlock{}} }

// errCut is a stream that ended before message_stop.
var errCut = errors.New("the Messages stream ended before message_stop")

// Translate reads the Messages SSE body to its end.
func (s *Stream) Translate(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	for {
		if s.werr != nil {
			return s.werr
		}
		line, err := br.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0 && len(data) > 0:
			if done, derr := s.Event(data); derr != nil || done {
				return derr
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
		if err == io.EOF {
			if len(data) > 0 {
				if done, derr := s.Event(data); derr != nil || done {
					return derr
				}
			}
			return errCut
		}
		if err != nil {
			return fmt.Errorf("read the Messages stream: %w", err)
		}
	}
}

type event struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        struct {
		Type         string  `json:"type"`
		Text         string  `json:"text"`
		PartialJSON  string  `json:"partial_json"`
		Thinking     string  `json:"thinking"`
		Signature    string  `json:"signature"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens             *int `json:"output_tokens"`
		InputTokens              *int `json:"input_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// Event handles one Messages event's data; done is message_stop (or an error).
func (s *Stream) Event(data []byte) (done bool, err error) {
	var e event
	if err := json.Unmarshal(data, &e); err != nil {
		return true, fmt.Errorf("a Messages stream event is not JSON: %w", err)
	}
	switch e.Type {
	case "message_start":
		if err := json.Unmarshal(e.Message, &s.msg); err != nil {
			return true, fmt.Errorf("message_start: %w", err)
		}
		s.msg.Content = nil
		snap := s.msg.responses("in_progress")
		snap.Usage = nil
		s.emit("response.created", map[string]any{"response": snap})
		s.emit("response.in_progress", map[string]any{"response": snap})
	case "content_block_start":
		lb := &liveBlock{}
		_ = json.Unmarshal(e.ContentBlock, &lb.head)
		lb.typ = lb.head.Type
		s.open[e.Index] = lb
		switch lb.typ {
		case "text":
			lb.buf.WriteString(lb.head.Text)
			id := itemID("msg", s.msg.ID, e.Index)
			s.emit("response.output_item.added", map[string]any{"output_index": e.Index,
				"item": messageItem{ID: id, Type: "message", Status: "in_progress", Role: "assistant", Content: []any{}}})
			s.emit("response.content_part.added", map[string]any{"item_id": id, "output_index": e.Index, "content_index": 0,
				"part": outputText{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})
			if lb.head.Text != "" {
				s.textDelta(e.Index, lb.head.Text)
			}
		case "tool_use":
			s.emit("response.output_item.added", map[string]any{"output_index": e.Index,
				"item": callItem{ID: itemID("fc", s.msg.ID, e.Index), Type: "function_call", Status: "in_progress", CallID: lb.head.ID, Name: lb.head.Name}})
		case "thinking":
			lb.buf.WriteString(lb.head.Thinking)
			lb.sig.WriteString(lb.head.Signature)
		}
	case "content_block_delta":
		lb := s.open[e.Index]
		if lb == nil {
			return true, fmt.Errorf("content_block_delta for block %d, which was never started", e.Index)
		}
		switch e.Delta.Type {
		case "text_delta":
			lb.buf.WriteString(e.Delta.Text)
			s.textDelta(e.Index, e.Delta.Text)
		case "input_json_delta":
			lb.buf.WriteString(e.Delta.PartialJSON)
			if e.Delta.PartialJSON != "" {
				s.emit("response.function_call_arguments.delta", map[string]any{"item_id": itemID("fc", s.msg.ID, e.Index), "output_index": e.Index, "delta": e.Delta.PartialJSON})
			}
		case "thinking_delta":
			lb.buf.WriteString(e.Delta.Thinking)
		case "signature_delta":
			lb.sig.WriteString(e.Delta.Signature)
		}
	case "content_block_stop":
		lb := s.open[e.Index]
		if lb == nil {
			return true, fmt.Errorf("content_block_stop for block %d, which was never started", e.Index)
		}
		for len(s.msg.Content) <= e.Index {
			s.msg.Content = append(s.msg.Content, json.RawMessage(`{}`))
		}
		s.msg.Content[e.Index] = lb.block()
		if lb.typ == "text" {
			id := itemID("msg", s.msg.ID, e.Index)
			s.emit("response.output_text.done", map[string]any{"item_id": id, "output_index": e.Index, "content_index": 0, "text": lb.buf.String(), "logprobs": []any{}})
		}
	case "message_delta":
		if e.Delta.StopReason != nil {
			s.msg.StopReason = e.Delta.StopReason
		}
		if e.Delta.StopSequence != nil {
			s.msg.StopSequence = e.Delta.StopSequence
		}
		if u := e.Usage; u != nil {
			setIf(&s.msg.Usage.OutputTokens, u.OutputTokens)
			setIf(&s.msg.Usage.InputTokens, u.InputTokens)
			setIf(&s.msg.Usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			setIf(&s.msg.Usage.CacheReadInputTokens, u.CacheReadInputTokens)
		}
	case "message_stop":
		r := s.msg.responses("completed")
		terminal := "response.completed"
		if r.Status == "incomplete" {
			terminal = "response.incomplete"
		}
		s.emit(terminal, map[string]any{"response": r})
		return true, s.werr
	case "error":
		msg, typ := "the Messages stream reported an error", "api_error"
		if e.Error != nil {
			msg, typ = e.Error.Message, e.Error.Type
		}
		s.emit("error", map[string]any{"code": typ, "message": msg, "param": nil})
		return true, s.werr
	}
	return false, s.werr
}

func setIf(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func (s *Stream) textDelta(index int, t string) {
	s.emit("response.output_text.delta", map[string]any{"item_id": itemID("msg", s.msg.ID, index), "output_index": index, "content_index": 0, "delta": t, "logprobs": []any{}})
}

// block is the finished content block as the non-streamed answer has it.
func (lb *liveBlock) block() json.RawMessage {
	var v any
	switch lb.typ {
	case "text":
		v = map[string]any{"type": "text", "text": lb.buf.String()}
	case "tool_use":
		input := json.RawMessage(lb.buf.Bytes())
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		v = map[string]any{"type": "tool_use", "id": lb.head.ID, "name": lb.head.Name, "input": input}
	case "thinking":
		v = map[string]any{"type": "thinking", "thinking": lb.buf.String(), "signature": lb.sig.String()}
	case "redacted_thinking":
		v = map[string]any{"type": "redacted_thinking", "data": lb.head.Data}
	default:
		v = lb.head
	}
	b, err := marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

func (s *Stream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, err := marshal(fields)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"type":"error","sequence_number":%d,"message":%q}`, s.seq-1, err.Error()))
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b); err != nil && s.werr == nil {
		s.werr = err
	}
}
