package chatcompletions

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"unicode/utf8"

	json "github.com/go-json-experiment/json/v1"
)

// Stream translates a Chat Completions chunk stream into the Responses
// event sequence (response.created, in_progress, each item's added,
// deltas and done, then response.completed or response.incomplete), with
// increasing sequence numbers, written as SSE to w. The terminal event
// carries the whole response, built as Response builds it, so a streamed
// turn and a plain one store the same body.
//
// Tool-call fragments are gathered by their index (a call's id and name
// come only in its first fragment); argument deltas go out as
// response.function_call_arguments.delta of the call's item once its name
// is known. Text split inside a UTF-8 sequence or a surrogate pair across
// chunks is held back until it is whole.
type Stream struct {
	w    io.Writer
	ids  ids
	seq  int
	meta Completion // id, model, created of the first chunk
	acc  accumulated

	started, done bool
	order         []string // output items in the order they were added: "reasoning", "message", "call"
	msgIndex      int
	rsIndex       int
	byIndex       map[int]*streamCall
	calls         []*streamCall
	seen          map[string]bool

	textTail, reasoningTail []byte // an incomplete character held for the next chunk
	werr                    error  // the first write error: the reader went away
}

type streamCall struct {
	acc       *accCall
	index     int  // output_index, once announced
	announced bool // output_item.added sent
	pending   string
}

// NewStream returns a translator writing Responses events to w.
func NewStream(w io.Writer) *Stream {
	return &Stream{w: w, ids: newIDs(), byIndex: map[int]*streamCall{}, seen: map[string]bool{}, msgIndex: -1, rsIndex: -1}
}

// ResponseID is the id of the response being streamed.
func (s *Stream) ResponseID() string { return s.ids.response() }

type chunk struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content          json.RawMessage `json:"content"`
			Refusal          *string         `json:"refusal"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ToolCalls        []replyToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// errStreamError ends a stream whose server sent an error chunk.
var errStreamError = errors.New("the server sent an error in the stream")

// Translate reads a Chat Completions SSE body from r to its end and writes
// the Responses events. A stream that ends without [DONE] and without a
// finish_reason was cut off: that is an error (the caller retries it when
// nothing was relayed yet), and no terminal event is written.
func (s *Stream) Translate(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	sawDone := false
	for {
		if s.werr != nil {
			return s.werr
		}
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case len(line) == 0:
				if len(data) > 0 {
					if stop, cerr := s.dispatch(data, &sawDone); cerr != nil || stop {
						return cerr
					}
					data = data[:0]
				}
			case line[0] == ':': // a comment (keep-alive, "OPENROUTER PROCESSING")
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(line[5:], []byte(" "))
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
		if err == io.EOF {
			if len(data) > 0 {
				if stop, cerr := s.dispatch(data, &sawDone); cerr != nil || stop {
					return cerr
				}
			}
			if !sawDone && s.acc.finish == "" {
				return fmt.Errorf("chat completions stream ended before [DONE] or a finish_reason: %w", io.ErrUnexpectedEOF)
			}
			return s.Finish()
		}
		if err != nil {
			return fmt.Errorf("reading the chat completions stream: %w", err)
		}
	}
}

// dispatch handles one SSE event's data; stop ends the stream.
func (s *Stream) dispatch(data []byte, sawDone *bool) (stop bool, err error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		*sawDone = true
		return true, s.Finish()
	}
	if err := s.Chunk(data); err != nil {
		if errors.Is(err, errStreamError) {
			return true, nil
		}
		return true, err
	}
	return false, nil
}

// Chunk translates one chunk (an SSE data payload).
func (s *Stream) Chunk(data []byte) error {
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("chat completions chunk is not valid JSON: %w", err)
	}
	if isSet(c.Error) {
		s.fail(c.Error)
		return errStreamError
	}
	s.start(c)
	if c.Usage != nil {
		s.acc.usage = c.Usage
	}
	if len(c.Choices) == 0 {
		return nil
	}
	ch := c.Choices[0]
	d := ch.Delta
	if t := decodeHeld(&s.reasoningTail, firstSet(d.ReasoningContent, d.Reasoning)); t != "" {
		s.reasoningDelta(t)
	}
	if t := decodeHeld(&s.textTail, d.Content); t != "" {
		s.textDelta(t)
	}
	if d.Content != nil && isSet(d.Content) {
		s.acc.hasText = true
	}
	if d.Refusal != nil {
		s.acc.refusal += *d.Refusal
	}
	for _, tc := range d.ToolCalls {
		if err := s.toolDelta(tc); err != nil {
			return err
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		s.acc.finish = *ch.FinishReason
	}
	return nil
}

func firstSet(a, b json.RawMessage) json.RawMessage {
	if isSet(a) {
		return a
	}
	return b
}

func (s *Stream) start(c chunk) {
	if s.started {
		return
	}
	s.started = true
	s.meta = Completion{ID: c.ID, Created: c.Created, Model: c.Model}
	snap := s.snapshot("in_progress")
	s.emit("response.created", map[string]any{"response": snap})
	s.emit("response.in_progress", map[string]any{"response": snap})
}

// snapshot is the response before any output, as the opening events carry it.
func (s *Stream) snapshot(status string) response {
	r := (&accumulated{}).response(s.ids, s.meta)
	r.Status, r.Usage, r.IncompleteDetails = status, nil, nil
	return r
}

func (s *Stream) reasoningDelta(t string) {
	if s.rsIndex < 0 {
		s.rsIndex = len(s.order)
		s.order = append(s.order, "reasoning")
		s.emit("response.output_item.added", map[string]any{"output_index": s.rsIndex,
			"item": reasoningItem{ID: s.ids.reasoning(), Type: "reasoning", Summary: []any{}, Content: []any{}}})
	}
	s.acc.reasoning += t
	s.emit("response.reasoning_text.delta", map[string]any{"item_id": s.ids.reasoning(), "output_index": s.rsIndex, "content_index": 0, "delta": t})
}

func (s *Stream) openMessage() {
	if s.msgIndex >= 0 {
		return
	}
	s.msgIndex = len(s.order)
	s.order = append(s.order, "message")
	s.emit("response.output_item.added", map[string]any{"output_index": s.msgIndex,
		"item": messageItem{ID: s.ids.message(), Type: "message", Status: "in_progress", Role: "assistant", Content: []any{}}})
	s.emit("response.content_part.added", map[string]any{"item_id": s.ids.message(), "output_index": s.msgIndex, "content_index": 0,
		"part": outputText{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})
}

func (s *Stream) textDelta(t string) {
	s.openMessage()
	s.acc.text += t
	s.emit("response.output_text.delta", map[string]any{"item_id": s.ids.message(), "output_index": s.msgIndex, "content_index": 0,
		"delta": t, "logprobs": []any{}})
}

// toolDelta gathers one tool-call fragment by its index. A fragment
// without an index continues the last call, unless it brings a new id.
func (s *Stream) toolDelta(tc replyToolCall) error {
	idx := -1
	if tc.Index != nil {
		idx = *tc.Index
	} else if n := len(s.calls); n > 0 && (tc.ID == "" || tc.ID == s.calls[n-1].acc.id) {
		idx = s.lastIndex()
	} else {
		idx = 1 << 20 // no index: one past any the server used
		for s.byIndex[idx] != nil {
			idx++
		}
	}
	c := s.byIndex[idx]
	if c == nil {
		c = &streamCall{acc: &accCall{}, index: -1}
		s.byIndex[idx] = c
		s.calls = append(s.calls, c)
		s.acc.calls = append(s.acc.calls, c.acc)
	}
	if tc.ID != "" && c.acc.id == "" {
		c.acc.id = tc.ID
	}
	if tc.Function.Name != "" && c.acc.name == "" {
		c.acc.name = tc.Function.Name
	}
	args, err := argumentFragment(tc.Function.Arguments)
	if err != nil {
		return err
	}
	c.acc.args += args
	if !c.announced {
		c.pending += args
		if c.acc.name == "" {
			return nil // announced once its name is known
		}
		s.announce(c)
		return nil
	}
	if args != "" {
		s.emit("response.function_call_arguments.delta", map[string]any{"item_id": s.ids.call(s.callNumber(c)), "output_index": c.index, "delta": args})
	}
	return nil
}

func (s *Stream) lastIndex() int {
	last := s.calls[len(s.calls)-1]
	for k, v := range s.byIndex {
		if v == last {
			return k
		}
	}
	return 0
}

// callNumber is the call's place among the reply's calls, which names its item.
func (s *Stream) callNumber(c *streamCall) int {
	for n, v := range s.calls {
		if v == c {
			return n
		}
	}
	return -1
}

func (s *Stream) announce(c *streamCall) {
	n := s.callNumber(c)
	c.acc.callID = s.ids.callID(c.acc.id, n, s.seen)
	c.announced = true
	c.index = len(s.order)
	s.order = append(s.order, "call")
	s.emit("response.output_item.added", map[string]any{"output_index": c.index, "item": functionCallItem{ID: s.ids.call(n), Type: "function_call",
		Status: "in_progress", CallID: c.acc.callID, Name: c.acc.name, Arguments: ""}})
	if c.pending != "" {
		s.emit("response.function_call_arguments.delta", map[string]any{"item_id": s.ids.call(n), "output_index": c.index, "delta": c.pending})
		c.pending = ""
	}
}

// argumentFragment is a fragment of a call's arguments: normally a piece
// of a JSON string; some servers send the whole arguments object at once.
func argumentFragment(raw json.RawMessage) (string, error) {
	if !isSet(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("tool call arguments fragment: %w", err)
	}
	return buf.String(), nil
}

// Finish closes every open item and writes the terminal event. It is
// called at [DONE], or at the end of a stream that had a finish_reason.
func (s *Stream) Finish() error {
	if s.done {
		return nil
	}
	s.done = true
	if !s.started {
		s.start(chunk{})
	}
	for _, c := range s.calls {
		if !c.announced {
			s.announce(c) // a call whose name never came: kept, so nothing is lost
		}
	}
	if _, ok := s.acc.message(s.ids, "completed"); ok && s.msgIndex < 0 {
		s.openMessage() // a refusal, or an empty text: no delta opened it
	}
	final := s.acc.response(s.ids, s.meta)
	final.Output = s.ordered(final.Output)
	for _, it := range final.Output {
		idx := s.indexOf(it)
		switch v := it.(type) {
		case reasoningItem:
			s.emit("response.reasoning_text.done", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": 0, "text": s.acc.reasoning})
		case messageItem:
			for ci, p := range v.Content {
				if ot, ok := p.(outputText); ok {
					s.emit("response.output_text.done", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "text": ot.Text, "logprobs": []any{}})
				}
				s.emit("response.content_part.done", map[string]any{"item_id": v.ID, "output_index": idx, "content_index": ci, "part": p})
			}
		case functionCallItem:
			s.emit("response.function_call_arguments.done", map[string]any{"item_id": v.ID, "output_index": idx, "name": v.Name, "arguments": v.Arguments})
		}
		s.emit("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	}
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	s.emit(typ, map[string]any{"response": final})
	return nil
}

// ordered puts the final output in the order the stream added its items.
func (s *Stream) ordered(out []any) []any {
	byKind := map[string][]any{}
	for _, it := range out {
		switch it.(type) {
		case reasoningItem:
			byKind["reasoning"] = append(byKind["reasoning"], it)
		case messageItem:
			byKind["message"] = append(byKind["message"], it)
		case functionCallItem:
			byKind["call"] = append(byKind["call"], it)
		}
	}
	res := make([]any, 0, len(out))
	for _, k := range s.order {
		if l := byKind[k]; len(l) > 0 {
			res = append(res, l[0])
			byKind[k] = l[1:]
		}
	}
	return res
}

func (s *Stream) indexOf(it any) int {
	switch v := it.(type) {
	case reasoningItem:
		return s.rsIndex
	case messageItem:
		return s.msgIndex
	case functionCallItem:
		for _, c := range s.calls {
			if c.acc.callID == v.CallID {
				return c.index
			}
		}
	}
	return -1
}

// fail writes an error event for an error chunk, in OpenAI's shape (code
// and message at the top level), and ends the stream.
func (s *Stream) fail(raw json.RawMessage) {
	s.done = true
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Param   json.RawMessage `json:"param"`
	}
	if json.Unmarshal(raw, &e) != nil {
		var msg string
		_ = json.Unmarshal(raw, &msg)
		e.Message = msg
	}
	if e.Message == "" {
		e.Message = "the chat completions server sent an error in the stream: " + string(raw)
	}
	code := any(nil)
	if isSet(e.Code) {
		code = e.Code
	}
	s.emit("error", map[string]any{"code": code, "message": e.Message, "param": nil})
}

func (s *Stream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"type":"error","sequence_number":%d,"message":%q}`, s.seq-1, err.Error()))
	}
	buf := make([]byte, 0, len(b)+len(typ)+20)
	buf = append(append(append(buf, "event: "...), typ...), "\ndata: "...)
	buf = append(append(buf, b...), "\n\n"...)
	if _, err := s.w.Write(buf); err != nil && s.werr == nil {
		s.werr = err
	}
}

// highSurrogate matches a JSON string ending in an escaped high surrogate.
var highSurrogate = regexp.MustCompile(`\\u[dD][89abAB][0-9a-fA-F]{2}$`)

// decodeHeld decodes a delta's JSON string, first prefixed with what the
// last one held back, and holds back an incomplete character at its end:
// raw UTF-8 bytes of a character cut between chunks, or a high surrogate
// escape whose low half comes in the next chunk.
func decodeHeld(tail *[]byte, raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return ""
	}
	inner := append(append([]byte(nil), *tail...), raw[1:len(raw)-1]...)
	*tail = nil
	if loc := highSurrogate.FindIndex(inner); loc != nil && !escaped(inner, loc[0]) {
		*tail = append([]byte(nil), inner[loc[0]:]...)
		inner = inner[:loc[0]]
	} else if n := incompleteTail(inner); n > 0 {
		*tail = append([]byte(nil), inner[len(inner)-n:]...)
		inner = inner[:len(inner)-n]
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, inner...), '"'), &s); err != nil {
		return ""
	}
	return s
}

// escaped reports whether the backslash at i is itself escaped.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// incompleteTail is the length of a UTF-8 sequence cut off at the end of b.
func incompleteTail(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
