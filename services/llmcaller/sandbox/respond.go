package sandbox

import (
	"errors"
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// maxBody bounds a request body; larger ones are rejected like any bad body.
const maxBody = 64 << 20

// admit reads a POST body, counts the request and applies its fault. It
// reports false when the request has been answered (bad body, fault); on
// true the caller owns the in-flight slot and must call s.end().
func (s *Server) admit(w http.ResponseWriter, r *http.Request) ([]byte, fault, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "sandbox: read request body: "+err.Error())
		return nil, fault{}, false
	}
	n := s.begin(body)
	f, err := s.faultFor(r, n)
	if err != nil {
		s.end()
		writeError(w, http.StatusBadRequest, "invalid_request_error", HeaderFault, "", "sandbox: "+err.Error())
		return nil, f, false
	}
	s.log.Debug("sandbox request (not a model)", "n", n, "path", r.URL.Path, "bytes", len(body), "fault", r.Header.Get(HeaderFault), "latency", f.latency)
	if !wantsBackground(body) { // a background response spends its latency generating (background.go)
		sleep(r.Context(), f.latency)
	}
	if s.apply(w, f) {
		s.end()
		return nil, f, false
	}
	return body, f, true
}

// create serves POST /v1/responses.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	body, f, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.end()
	req, items, err := parseRequest(body)
	if err == nil {
		err = s.openCompactions(items)
	}
	if err == nil && req.Background {
		if err = s.startBackground(w, r, req, items, f); err == nil {
			return
		}
	} else if err == nil {
		var resp response
		var chain []json.RawMessage
		resp, chain, err = s.answer(req, items)
		if err == nil {
			s.bg.created.Add(1)
			s.finish(w, req, resp, chain, f.streamError)
			return
		}
	}
	writeFailure(w, err)
}

// finish stores the response for previous_response_id and writes it as JSON or SSE.
func (s *Server) finish(w http.ResponseWriter, req request, resp response, chain []json.RawMessage, streamError bool) {
	st, err := storedOf(resp, chain)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "", "sandbox: "+err.Error())
		return
	}
	raw := st.response
	if !streamError {
		s.save(resp.ID, st)
	}
	if req.Stream {
		s.stream(w, resp, streamError)
		return
	}
	if streamError {
		writeError(w, http.StatusInternalServerError, "server_error", "", "server_error", "sandbox fault: stream-error on a non-streaming request")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// storedOf is what the sandbox keeps of a finished response: the object,
// the conversation's items through its output, and its output item ids.
func storedOf(resp response, chain []json.RawMessage) (stored, error) {
	raw, err := json.Marshal(resp)
	if err != nil {
		return stored{}, fmt.Errorf("encode response: %w", err)
	}
	var outIDs []string
	for _, it := range resp.Output {
		b, _ := json.Marshal(it)
		chain = append(chain, b)
		switch v := it.(type) {
		case messageItem:
			outIDs = append(outIDs, v.ID)
		case functionCallItem:
			outIDs = append(outIDs, v.ID)
		}
	}
	return stored{response: raw, items: chain, outIDs: outIDs}, nil
}

// answer builds the deterministic response and the conversation's items so far.
// Every item is decoded once: the request's by parseRequest, a stored
// chain's here, and the returned chain is their bytes, to be stored.
func (s *Server) answer(req request, items []entry) (response, []json.RawMessage, error) {
	var chain []entry
	prevID := req.PreviousResponseID
	if prevID != "" {
		st, ok := s.lookup(prevID)
		if !ok {
			return response{}, nil, invalid("previous_response_id", "previous_response_not_found",
				fmt.Sprintf("Previous response with id '%s' not found.", prevID))
		}
		chain = decodeEntries(st.items)
	} else {
		prevID = s.replayedFrom(items)
	}
	chain = append(chain, items...)
	turn := readTurn(chain)
	userTexts := lastUserTexts(items) // parsed once: the reply and the stats both need it
	if userTexts == nil {
		// A tool round's input holds only outputs: the turn's user message is in the history.
		userTexts = turn.user.texts()
	}
	s.countInstruction(reply.InstructionOf(userTexts))
	ch, err := resolveChoice(req)
	if err != nil {
		return response{}, nil, err
	}
	format, err := reply.ResponsesFormat([]byte(req.Text))
	switch {
	case errors.Is(err, reply.ErrNoSchema):
		return response{}, nil, invalid("text.format.schema", "missing_required_parameter", "Missing required parameter: 'text.format.schema'.")
	case err != nil:
		return response{}, nil, invalid("text.format", "invalid_value", "Invalid 'text.format': "+err.Error())
	}

	inputBytes := 0
	for _, e := range chain {
		inputBytes += len(e.raw)
	}
	inputTokens := tokenCount(inputBytes)
	resp := newResponse(req, ch)
	var compaction []any
	if th := req.compactThreshold(); th > 0 && inputTokens > th {
		item, e := s.compactInline(chain)
		compaction = []any{item}
		chain = []entry{e} // the model answers from the compacted context
	}

	calls, err := toolCalls(req, ch, turn, reply.Request(userTexts))
	if err != nil {
		return response{}, nil, err
	}
	var outText string
	if len(calls) > 0 {
		for _, c := range calls {
			outText += c.Arguments
			resp.Output = append(resp.Output, c)
		}
	} else {
		text, ok := s.nextScript()
		if !ok {
			sentence := reply.Sentence(userTexts, prevID) + attachmentNote(turn.user) + s.compactionNote(chain) + quoteOutputs(turn.outputs)
			if text, err = reply.Text(format, sentence, reply.Request(userTexts)); err != nil {
				return response{}, nil, invalid("text.format.schema", "invalid_json_schema", "Invalid 'text.format.schema': "+err.Error())
			}
		}
		msg := messageItem{ID: newID("msg_"), Type: "message", Status: "completed", Role: "assistant"}
		if req.MaxOutputTokens != nil && tokens(text) > *req.MaxOutputTokens {
			text = truncate(text, *req.MaxOutputTokens*4)
			msg.Status = "incomplete"
			resp.Status = "incomplete"
			resp.IncompleteDetails = &incomplete{Reason: "max_output_tokens"}
		}
		msg.Content = []outputText{newOutputText(text)}
		outText = text
		resp.Output = []any{msg}
	}
	if compaction != nil {
		resp.Output = append(compaction, resp.Output...)
		chain = nil // the compaction item leads the output, which storedOf keeps
	}
	out := tokens(outText)
	if req.MaxOutputTokens != nil {
		out = min(out, *req.MaxOutputTokens)
	}
	resp.Usage = newUsage(inputTokens, out)
	resp.finishAt(time.Now())
	return resp, raws(chain), nil
}

// replayedFrom recognises a client that replays the conversation's items
// instead of sending previous_response_id: the last input item the sandbox
// produced names the response it came from, so the reply is the same either way.
func (s *Server) replayedFrom(items []entry) string {
	for i := len(items) - 1; i >= 0; i-- {
		if id := items[i].it.ID; items[i].err == nil && id != "" {
			if owner := s.ownerOf(id); owner != "" {
				return owner
			}
		}
	}
	return ""
}

// toolCalls are the calls the model makes (none: it answers in text):
// the markers' calls still without output (the first only when
// parallel_tool_calls is false), else what reply.ToolCall decides from
// tool_choice, the function tools and the user's request. tool_choice
// "none" makes none.
func toolCalls(req request, ch choice, turn turnState, request string) ([]functionCallItem, error) {
	if ch.none() {
		return nil, nil
	}
	if calls := turn.pending; len(calls) > 0 {
		if !deref(req.ParallelToolCalls, true) {
			calls = calls[:1]
		}
		return calls, nil
	}
	c, ok, err := reply.ToolCall(request, functionTools(req.Tools), ch.rule, len(turn.outputs) > 0)
	if err != nil {
		return nil, invalid("tools", "invalid_function_parameters", "Invalid function parameters: "+err.Error())
	}
	if !ok {
		return nil, nil
	}
	id := newID("call_") // a forced call is made again on every round: a new id each time
	if ch.rule.Mode == "auto" {
		// As a marker's: the same request gets the same call id.
		id = callID(turn.userIndex, request+"\x00auto", 0, reply.Marker{Name: c.Name, Arguments: c.Arguments})
	}
	return []functionCallItem{{ID: newID("fc_"), Type: "function_call", Status: "completed",
		CallID: id, Name: c.Name, Arguments: c.Arguments}}, nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
