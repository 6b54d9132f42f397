package sandbox

import (
	"fmt"
	"net/http"
	"strings"

	json "github.com/go-json-experiment/json/v1"
)

// The sandbox's Chat Completions endpoint (POST /v1/chat/completions,
// docs/sandbox.md): the same deterministic answer as /v1/responses (the
// reply sentence, the [call:NAME {json}] rule, forced tool_choice,
// max tokens, scripts, faults), read from messages and written as a chat
// completion or chunk stream. Like every Chat Completions server it keeps
// nothing: the conversation is in the messages. It checks what OpenAI
// checks, so a client that orders messages wrongly is told so: a tool
// message must answer a tool call of an earlier assistant message, and
// tool_choice or parallel_tool_calls need tools.

// chatRequest is the part of a chat completions body the sandbox reads.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MaxTokens           *int            `json:"max_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat  json.RawMessage `json:"response_format"`
	ReasoningEffort json.RawMessage `json:"reasoning_effort"`
	User            *string         `json:"user"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, f, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.end()
	cr, req, items, err := parseChat(body)
	if err == nil {
		var resp response
		if resp, _, err = s.answer(req, items); err == nil {
			s.bg.created.Add(1)
			if cr.Stream {
				s.chatStream(w, cr, resp, f.streamError)
				return
			}
			if f.streamError {
				writeError(w, http.StatusInternalServerError, "server_error", "", "server_error", "sandbox fault: stream-error on a non-streaming request")
				return
			}
			writeJSON(w, http.StatusOK, chatCompletion(resp))
			return
		}
	}
	writeFailure(w, err)
}

// parseChat reads a chat request as the Responses request the answer logic
// takes: leading system/developer messages become the instructions (so a
// conversation's items sit where a Responses request puts them, and the
// tool rule's call ids match across replays), user content parts become
// input parts, assistant tool calls function_call items, tool messages
// function_call_output items.
func parseChat(body []byte) (chatRequest, request, []entry, error) {
	var cr chatRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return cr, request{}, nil, invalid("", "", fmt.Sprintf("We could not parse the JSON body of your request. Sandbox detail: %v", err))
	}
	if len(cr.Messages) == 0 {
		return cr, request{}, nil, invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(cr.Tools) == 0 && len(cr.ToolChoice) > 0 {
		return cr, request{}, nil, invalid("tool_choice", "", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
	}
	if len(cr.Tools) == 0 && cr.ParallelToolCalls != nil {
		return cr, request{}, nil, invalid("parallel_tool_calls", "", "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.")
	}
	req := request{Model: cr.Model, Tools: cr.Tools, ParallelToolCalls: cr.ParallelToolCalls, Temperature: cr.Temperature, TopP: cr.TopP, User: cr.User}
	req.MaxOutputTokens = cr.MaxCompletionTokens
	if req.MaxOutputTokens == nil {
		req.MaxOutputTokens = cr.MaxTokens
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		return cr, req, nil, invalid("max_completion_tokens", "integer_below_min_value", "Invalid 'max_completion_tokens': integer below minimum value.")
	}
	if len(cr.ToolChoice) > 0 {
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(cr.ToolChoice, &c) == nil && c.Type == "function" {
			req.ToolChoice, _ = json.Marshal(map[string]string{"type": "function", "name": c.Function.Name})
		} else {
			req.ToolChoice = cr.ToolChoice
		}
	}
	if len(cr.ResponseFormat) > 0 {
		req.Text = chatTextFormat(cr.ResponseFormat)
	}
	if len(cr.ReasoningEffort) > 0 {
		req.Reasoning, _ = json.Marshal(map[string]json.RawMessage{"effort": cr.ReasoningEffort})
	}
	var instructions []string
	var raws [][]byte
	calls := map[string]bool{}
	for i, m := range cr.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		texts, parts, err := chatContent(param, m.Content)
		if err != nil {
			return cr, req, nil, err
		}
		switch m.Role {
		case "system", "developer":
			if len(raws) == 0 {
				instructions = append(instructions, strings.Join(texts, "\n\n"))
				continue
			}
			raws = append(raws, mustJSON(map[string]any{"type": "message", "role": m.Role, "content": parts}))
		case "user":
			raws = append(raws, mustJSON(map[string]any{"type": "message", "role": "user", "content": parts}))
		case "assistant":
			if len(texts) > 0 && strings.Join(texts, "") != "" {
				out := make([]outputText, 0, len(texts))
				for _, t := range texts {
					out = append(out, newOutputText(t))
				}
				raws = append(raws, mustJSON(map[string]any{"type": "message", "role": "assistant", "content": out}))
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return cr, req, nil, invalid(fmt.Sprintf("%s.tool_calls[%d]", param, j), "missing_required_parameter", "A tool call needs 'id' and 'function.name'.")
				}
				calls[tc.ID] = true
				raws = append(raws, mustJSON(functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed",
					CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}))
			}
		case "tool":
			if !calls[m.ToolCallID] {
				return cr, req, nil, invalid(param+".role", "", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			raws = append(raws, mustJSON(map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": strings.Join(texts, "")}))
		default:
			return cr, req, nil, invalid(param+".role", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", m.Role))
		}
	}
	if len(instructions) > 0 {
		req.Instructions = mustJSON(strings.Join(instructions, "\n\n"))
	}
	items := make([]entry, len(raws))
	for i, raw := range raws {
		items[i] = decodeEntry(raw)
	}
	return cr, req, items, nil
}

// chatContent reads a message's content (a string, null, or parts) as its
// texts and as Responses input parts.
func chatContent(param string, raw json.RawMessage) ([]string, []part, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, []part{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, []part{{Type: "input_text", Text: s}}, nil
	}
	var ps []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		File struct {
			FileID   string `json:"file_id"`
			FileData string `json:"file_data"`
		} `json:"file"`
	}
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, nil, invalid(param+".content", "invalid_type", fmt.Sprintf("Invalid '%s.content': expected a string or an array of content parts.", param))
	}
	var texts []string
	parts := make([]part, 0, len(ps))
	for j, p := range ps {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
			parts = append(parts, part{Type: "input_text", Text: p.Text})
		case "image_url":
			if p.ImageURL.URL == "" {
				return nil, nil, invalid(fmt.Sprintf("%s.content[%d].image_url.url", param, j), "missing_required_parameter", "An image_url part needs 'image_url.url'.")
			}
			parts = append(parts, part{Type: "input_image", ImageURL: p.ImageURL.URL})
		case "file":
			parts = append(parts, part{Type: "input_file", FileID: p.File.FileID, FileData: p.File.FileData})
		case "input_audio":
		default:
			return nil, nil, invalid(fmt.Sprintf("%s.content[%d].type", param, j), "invalid_value", fmt.Sprintf("Invalid content part type '%s'.", p.Type))
		}
	}
	return texts, parts, nil
}

// chatTextFormat maps response_format to the Responses text.format.
func chatTextFormat(raw json.RawMessage) json.RawMessage {
	var rf struct {
		Type       string         `json:"type"`
		JSONSchema map[string]any `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return nil
	}
	format := map[string]any{"type": rf.Type}
	for k, v := range rf.JSONSchema {
		format[k] = v
	}
	return mustJSON(map[string]any{"format": format})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sandbox: encode %T: %v", v, err))
	}
	return b
}

// chatReply is the reply as Chat Completions says it.
type chatReply struct {
	text, finish string
	calls        []functionCallItem
	usage        *usage
}

func replyOf(resp response) chatReply {
	r := chatReply{finish: "stop", usage: resp.Usage}
	for _, it := range resp.Output {
		switch v := it.(type) {
		case messageItem:
			for _, p := range v.Content {
				r.text += p.Text
			}
		case functionCallItem:
			r.calls = append(r.calls, v)
		}
	}
	switch {
	case resp.Status == "incomplete":
		r.finish = "length"
	case len(r.calls) > 0:
		r.finish = "tool_calls"
	}
	return r
}

func chatUsage(u *usage) map[string]any {
	if u == nil {
		return nil
	}
	return map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.TotalTokens,
		"prompt_tokens_details": map[string]int{"cached_tokens": 0}, "completion_tokens_details": map[string]int{"reasoning_tokens": 0}}
}

func chatID(resp response) string { return "chatcmpl-" + strings.TrimPrefix(resp.ID, "resp_") }

// chatCompletion is the non-streaming reply.
func chatCompletion(resp response) map[string]any {
	r := replyOf(resp)
	msg := map[string]any{"role": "assistant", "content": r.text, "refusal": nil}
	if len(r.calls) > 0 {
		msg["content"] = nil // a call's arguments are not text
		tcs := make([]chatToolCall, len(r.calls))
		for i, c := range r.calls {
			tcs[i].ID, tcs[i].Type = c.CallID, "function"
			tcs[i].Function.Name, tcs[i].Function.Arguments = c.Name, c.Arguments
		}
		msg["tool_calls"] = tcs
	}
	return map[string]any{"id": chatID(resp), "object": "chat.completion", "created": resp.CreatedAt, "model": resp.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": r.finish, "logprobs": nil}},
		"usage":   chatUsage(r.usage), "system_fingerprint": "aptix-sandbox", "sandbox": true}
}

// chatStream writes the reply as chunks: the role, the text a few words at
// a time, each call's id and name then its arguments in pieces (keyed by
// index), the finish reason, the usage when stream_options asked for it,
// and [DONE]. The stream-error fault sends an error chunk after the role.
func (s *Server) chatStream(w http.ResponseWriter, cr chatRequest, resp response, streamError bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	base := map[string]any{"id": chatID(resp), "object": "chat.completion.chunk", "created": resp.CreatedAt, "model": resp.Model, "system_fingerprint": "aptix-sandbox"}
	send := func(choices []map[string]any, extra map[string]any) {
		c := map[string]any{"choices": choices}
		for k, v := range base {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		_, _ = w.Write([]byte("data: "))
		_, _ = w.Write(mustJSON(c))
		_, _ = w.Write([]byte("\n\n"))
		if fl != nil {
			fl.Flush()
		}
	}
	delta := func(d map[string]any) []map[string]any {
		return []map[string]any{{"index": 0, "delta": d, "finish_reason": nil, "logprobs": nil}}
	}
	r := replyOf(resp)
	send(delta(map[string]any{"role": "assistant", "content": ""}), nil)
	if streamError {
		send(nil, map[string]any{"error": map[string]any{"message": "sandbox fault: stream-error", "type": "server_error", "code": "server_error"}})
		return
	}
	if len(r.calls) == 0 {
		for _, d := range chunks(r.text, 3) {
			send(delta(map[string]any{"content": d}), nil)
		}
	}
	for i, c := range r.calls {
		send(delta(map[string]any{"tool_calls": []map[string]any{{"index": i, "id": c.CallID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}), nil)
		for _, a := range byteChunks(c.Arguments, 8) {
			send(delta(map[string]any{"tool_calls": []map[string]any{{"index": i, "function": map[string]any{"arguments": a}}}}), nil)
		}
	}
	send([]map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": r.finish, "logprobs": nil}}, nil)
	if cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage {
		send([]map[string]any{}, map[string]any{"usage": chatUsage(r.usage)})
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if fl != nil {
		fl.Flush()
	}
}
