package sandbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// The sandbox's Messages endpoint (POST /v1/messages, docs/sandbox.md):
// the same deterministic answer as /v1/responses (the reply sentence, the
// [call:NAME {json}] rule, tool_choice, max_tokens, faults), read from
// an Anthropic Messages request and written as a message or Anthropic's
// event stream. Like Anthropic it keeps nothing: the conversation is in
// the messages, and max_tokens is required.
//
// With thinking enabled the answer opens with a thinking block whose
// signature is an HMAC of its text under the sandbox's key. A thinking
// block sent back in a later request must carry that signature: a changed
// text or signature is refused as Anthropic refuses it (400, "Invalid
// `signature` in `thinking` block"), so a proxy that re-serialises the
// blocks is caught without a network.

// thinkingKey signs the sandbox's thinking blocks.
var thinkingKey = []byte("aptix-sandbox-thinking")

// Signature is the signature the sandbox gives a thinking block with text
// thinking (exported for tests that forge or check one).
func Signature(thinking string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte(thinking))
	return "sbx1." + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

type messagesRequest struct {
	Model     string          `json:"model"`
	System    json.RawMessage `json:"system"`
	Messages  []anthMessage   `json:"messages"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	Tools     []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	Thinking    *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	Metadata *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
}

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// messagesCreate serves POST /v1/messages.
func (s *Server) messagesCreate(w http.ResponseWriter, r *http.Request) {
	body, f, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.end()
	mr, req, items, err := parseMessages(body)
	if err == nil {
		var resp response
		if resp, _, err = s.answer(req, items); err == nil {
			s.bg.created.Add(1)
			msg := anthropicMessage(mr, resp)
			if mr.Stream {
				s.messagesStream(w, msg, f.streamError)
				return
			}
			writeJSON(w, http.StatusOK, msg)
			return
		}
	}
	var br *badRequest
	if errors.As(err, &br) {
		writeJSON(w, http.StatusBadRequest, anthError("invalid_request_error", br.msg))
		return
	}
	writeJSON(w, http.StatusInternalServerError, anthError("api_error", "sandbox: "+err.Error()))
}

func anthError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
}

// parseMessages reads a Messages request as the Responses request the
// answer logic takes, checking what Anthropic checks: max_tokens, roles,
// a tool_result answering a tool_use of the message before, and every
// thinking block's signature.
func parseMessages(body []byte) (messagesRequest, request, []entry, error) {
	var mr messagesRequest
	if err := json.Unmarshal(body, &mr); err != nil {
		return mr, request{}, nil, invalid("", "", "sandbox: the body is not a Messages request: "+err.Error())
	}
	if mr.MaxTokens == nil {
		return mr, request{}, nil, invalid("max_tokens", "", "max_tokens: Field required")
	}
	if len(mr.Messages) == 0 {
		return mr, request{}, nil, invalid("messages", "", "messages: at least one message is required")
	}
	req := request{Model: mr.Model, MaxOutputTokens: mr.MaxTokens, Temperature: mr.Temperature, TopP: mr.TopP}
	if mr.Metadata != nil {
		req.User = mr.Metadata.UserID
	}
	for _, t := range mr.Tools {
		var tl tool
		if err := json.Unmarshal(mustJSON(map[string]any{"type": "function", "name": t.Name, "description": t.Description, "parameters": t.InputSchema}), &tl); err != nil {
			return mr, req, nil, invalid("tools", "", "tools: "+err.Error())
		}
		req.Tools = append(req.Tools, tl)
	}
	if tc := mr.ToolChoice; tc != nil {
		switch tc.Type {
		case "any":
			req.ToolChoice = mustJSON("required")
		case "none":
			req.ToolChoice = mustJSON("none")
		case "tool":
			req.ToolChoice = mustJSON(map[string]string{"type": "function", "name": tc.Name})
		}
		if tc.DisableParallelToolUse {
			f := false
			req.ParallelToolCalls = &f
		}
	}
	if len(mr.System) > 0 {
		var s string
		if json.Unmarshal(mr.System, &s) != nil {
			var blocks []anthBlock
			_ = json.Unmarshal(mr.System, &blocks)
			var texts []string
			for _, b := range blocks {
				texts = append(texts, b.Text)
			}
			s = strings.Join(texts, "\n\n")
		}
		if s != "" {
			req.Instructions = mustJSON(s)
		}
	}
	var raws [][]byte
	var lastCalls map[string]bool
	for i, m := range mr.Messages {
		p := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return mr, req, nil, invalid(p+".role", "", p+".role: Input should be 'user' or 'assistant'")
		}
		var blocks []anthBlock
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			blocks = []anthBlock{{Type: "text", Text: str}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return mr, req, nil, invalid(p+".content", "", p+".content: Input should be a valid list")
		}
		calls := map[string]bool{}
		var parts []part
		var texts []outputText
		flush := func() {
			if m.Role == "user" && len(parts) > 0 {
				raws = append(raws, mustJSON(map[string]any{"type": "message", "role": "user", "content": parts}))
			}
			if m.Role == "assistant" && len(texts) > 0 {
				raws = append(raws, mustJSON(map[string]any{"type": "message", "role": "assistant", "content": texts}))
			}
			parts, texts = nil, nil
		}
		for j, b := range blocks {
			bp := fmt.Sprintf("%s.content.%d", p, j)
			switch b.Type {
			case "text":
				if m.Role == "user" {
					parts = append(parts, part{Type: "input_text", Text: b.Text})
				} else {
					texts = append(texts, newOutputText(b.Text))
				}
			case "image", "document":
				if b.Source != nil && b.Source.Type == "base64" {
					parts = append(parts, part{Type: "input_image", ImageURL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data})
				} else if b.Source != nil {
					parts = append(parts, part{Type: "input_image", ImageURL: b.Source.URL})
				}
			case "thinking":
				if m.Role != "assistant" || b.Signature != Signature(b.Thinking) {
					return mr, req, nil, invalid(bp, "", bp+": Invalid `signature` in `thinking` block")
				}
			case "redacted_thinking":
				return mr, req, nil, invalid(bp, "", bp+": Invalid `data` in `redacted_thinking` block (the sandbox redacts nothing)")
			case "tool_use":
				flush()
				calls[b.ID] = true
				b.ID = sandboxCallID(b.ID)
				args := "{}"
				if len(b.Input) > 0 {
					args = string(b.Input)
				}
				raws = append(raws, mustJSON(functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed", CallID: b.ID, Name: b.Name, Arguments: args}))
			case "tool_result":
				if !lastCalls[b.ToolUseID] {
					return mr, req, nil, invalid(bp, "", bp+": unexpected `tool_use_id` found in `tool_result` blocks: "+b.ToolUseID+". Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")
				}
				flush()
				var out string
				if json.Unmarshal(b.Content, &out) != nil {
					var inner []anthBlock
					_ = json.Unmarshal(b.Content, &inner)
					for _, ib := range inner {
						out += ib.Text
					}
				}
				raws = append(raws, mustJSON(map[string]any{"type": "function_call_output", "call_id": sandboxCallID(b.ToolUseID), "output": out}))
			default:
				return mr, req, nil, invalid(bp+".type", "", fmt.Sprintf("%s.type: content block type %q is not served by the sandbox", bp, b.Type))
			}
		}
		flush()
		lastCalls = calls
	}
	items := make([]entry, len(raws))
	for i, raw := range raws {
		items[i] = decodeEntry(raw)
	}
	return mr, req, items, nil
}

// sandboxCallID is the sandbox's call id of a tool_use id it gave (toolu_X for
// call_X), so its tool rule recognises its own calls.
func sandboxCallID(toolUseID string) string {
	if rest, ok := strings.CutPrefix(toolUseID, "toolu_"); ok {
		return "call_" + rest
	}
	return toolUseID
}

// anthropicMessage is the answer as a Messages message: with thinking
// enabled a signed thinking block first, then the reply's text and calls.
func anthropicMessage(mr messagesRequest, resp response) map[string]any {
	r := replyOf(resp)
	var content []map[string]any
	if mr.Thinking != nil && mr.Thinking.Type == "enabled" {
		t := fmt.Sprintf("The sandbox considers %s (%d messages so far).", resp.ID, len(mr.Messages))
		content = append(content, map[string]any{"type": "thinking", "thinking": t, "signature": Signature(t)})
	}
	if r.text != "" || len(r.calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": r.text})
	}
	for _, c := range r.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + strings.TrimPrefix(c.CallID, "call_"), "name": c.Name, "input": json.RawMessage(c.Arguments)})
	}
	stop := "end_turn"
	switch r.finish {
	case "length":
		stop = "max_tokens"
	case "tool_calls":
		stop = "tool_use"
	}
	u := map[string]int{"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if r.usage != nil {
		u["input_tokens"], u["output_tokens"] = r.usage.InputTokens, r.usage.OutputTokens
	}
	return map[string]any{"id": "msg_" + strings.TrimPrefix(resp.ID, "resp_"), "type": "message", "role": "assistant", "model": resp.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": u}
}

// messagesStream writes msg as Anthropic's events: message_start, ping,
// each block's start, deltas (text a few words at a time, tool input and
// thinking in pieces, the signature whole) and stop, message_delta,
// message_stop. The stream-error fault sends an error event after ping.
func (s *Server) messagesStream(w http.ResponseWriter, msg map[string]any, streamError bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(name string, v any) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, mustJSON(v))
		if fl != nil {
			fl.Flush()
		}
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	usage, _ := msg["usage"].(map[string]int)
	startUsage := map[string]int{"input_tokens": usage["input_tokens"], "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	start["usage"] = startUsage
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]any{"type": "ping"})
	if streamError {
		send("error", anthError("overloaded_error", "sandbox fault: stream-error"))
		return
	}
	content, _ := msg["content"].([]map[string]any)
	for i, b := range content {
		delta := func(d map[string]any) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch b["type"] {
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range chunks(b["text"].(string), 3) {
				delta(map[string]any{"type": "text_delta", "text": c})
			}
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, c := range chunks(b["thinking"].(string), 3) {
				delta(map[string]any{"type": "thinking_delta", "thinking": c})
			}
			delta(map[string]any{"type": "signature_delta", "signature": b["signature"]})
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			for _, c := range byteChunks(string(b["input"].(json.RawMessage)), 8) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": c})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// messagesCountTokens serves POST /v1/messages/count_tokens: the input
// tokens of the system prompt, messages and tools (~4 bytes a token, as
// /v1/responses/input_tokens counts). Not a model call.
func (s *Server) messagesCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || len(req.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, anthError("invalid_request_error", fmt.Sprintf("sandbox: not a count_tokens request (%v)", err)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": tokenCount(len(req.System) + len(req.Messages) + len(req.Tools))})
}
