// Package chatcompletions puts a Chat Completions server behind Aptix's
// Responses semantics (docs/backends.md): Request translates the Responses
// request the envelope built (AGN-003) into a Chat Completions request,
// Response and Stream translate the reply back into a Responses body or
// event stream, which the mapper (AGN-004) reads as it reads any Responses
// result, and Transport binds both to an HTTP client, so the LLM caller's
// retries, pay-once, streaming and tool emulation run unchanged on top.
//
// It is plain Go: no bus, and no server's quirk in code (they are
// profiles.Chat fields).
package chatcompletions

import (
	"bytes"
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// RequestError is a Responses request that cannot be said in Chat
// Completions (a hosted tool, an item type with no message form, …): the
// transport answers it as a 400 before anything is sent or paid for.
type RequestError struct {
	Param, Code, Message string
}

func (e *RequestError) Error() string { return e.Message }

func reqErr(param, code, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeUnsupported is the error code of a request a Chat Completions backend
// cannot take.
const CodeUnsupported = "unsupported_for_chat_completions"

// responsesRequest is the Responses request fields the translation reads.
type responsesRequest struct {
	Model             string          `json:"model"`
	Input             json.RawMessage `json:"input"`
	Instructions      json.RawMessage `json:"instructions"`
	Tools             []tool          `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	MaxOutputTokens   json.RawMessage `json:"max_output_tokens"`
	Text              *textConfig     `json:"text"`
	Reasoning         *struct {
		Effort json.RawMessage `json:"effort"`
	} `json:"reasoning"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	Stream             bool            `json:"stream"`
	Background         bool            `json:"background"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Prompt             json.RawMessage `json:"prompt"`
}

// from fills r from the body's top-level fields; the input and the
// instructions are kept raw.
func (r *responsesRequest) from(all map[string]json.RawMessage) error {
	r.Input, r.Instructions, r.ToolChoice = all["input"], all["instructions"], all["tool_choice"]
	r.ParallelToolCalls, r.MaxOutputTokens, r.TopLogprobs = all["parallel_tool_calls"], all["max_output_tokens"], all["top_logprobs"]
	r.Conversation, r.Prompt = all["conversation"], all["prompt"]
	for name, dst := range map[string]any{"model": &r.Model, "tools": &r.Tools, "text": &r.Text, "reasoning": &r.Reasoning,
		"stream": &r.Stream, "background": &r.Background, "previous_response_id": &r.PreviousResponseID} {
		if raw, ok := all[name]; ok && isSet(raw) {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// handled are the Responses fields translated (or deliberately not sent);
// any other field of the body goes to the server as it is, so a client can
// pass a server's own parameters (top_k, min_p, …).
var handled = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true,
	"parallel_tool_calls": true, "max_output_tokens": true, "text": true, "reasoning": true,
	"top_logprobs": true, "stream": true, "background": true, "previous_response_id": true,
	"conversation": true, "prompt": true,
	// Responses-only settings with no Chat Completions meaning. store is
	// not passed: on OpenAI's chat endpoint it would keep the completion.
	"store": true, "metadata": true, "truncation": true, "include": true, "max_tool_calls": true,
	"stream_options": true, "context_management": true, "client_metadata": true,
}

type textConfig struct {
	Format *struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"format"`
	Verbosity json.RawMessage `json:"verbosity"`
}

// tool reads a function tool flat (Responses) or nested (Chat Completions).
type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      json.RawMessage `json:"strict"`
	Function    *struct {
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"function"`
}

// Message is one Chat Completions message. Content is a string, an array
// of parts, or nil (JSON null: an assistant message with only tool calls).
type Message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	Refusal    *string    `json:"refusal,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is an assistant message's call of a function tool.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as a JSON string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// Request translates a Responses request body into a Chat Completions one
// for a server with quirks q. The conversation must be in the input: a
// Chat Completions server keeps none, so the caller has replaced
// previous_response_id with the stored items before this runs.
func Request(body []byte, q profiles.Chat) ([]byte, error) {
	// One pass over the body (the input, most of it, is kept raw), then
	// the small fields decoded from their own bytes.
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return nil, reqErr("", "invalid_json", "request body is not a JSON object: %v", err)
	}
	var r responsesRequest
	if err := r.from(all); err != nil {
		return nil, reqErr("", "invalid_json", "request body is not a Responses request: %v", err)
	}
	switch {
	case r.PreviousResponseID != "":
		return nil, reqErr("previous_response_id", CodeUnsupported, "a Chat Completions backend has no previous_response_id; the conversation must be replayed as input")
	case r.Background:
		return nil, reqErr("background", CodeUnsupported, "a Chat Completions backend has no background mode")
	case isSet(r.Conversation):
		return nil, reqErr("conversation", CodeUnsupported, "a Chat Completions backend keeps no conversations")
	case isSet(r.Prompt):
		return nil, reqErr("prompt", CodeUnsupported, "stored prompts are a Responses API feature; a Chat Completions backend has none")
	}
	out := map[string]any{}
	for k, v := range all {
		if !handled[k] {
			out[k] = v
		}
	}
	out["model"] = r.Model

	b := messageBuilder{q: q, known: map[string]bool{}}
	if err := b.instructions(r.Instructions); err != nil {
		return nil, err
	}
	if err := b.input(r.Input); err != nil {
		return nil, err
	}
	out["messages"] = b.msgs

	if len(r.Tools) > 0 {
		tools := make([]chatTool, 0, len(r.Tools))
		for i, t := range r.Tools {
			ct, err := convertTool(i, t)
			if err != nil {
				return nil, err
			}
			tools = append(tools, ct)
		}
		out["tools"] = tools
		if isSet(r.ToolChoice) {
			tc, err := toolChoice(r.ToolChoice)
			if err != nil {
				return nil, err
			}
			out["tool_choice"] = tc
		}
		// Only with tools: OpenAI refuses parallel_tool_calls and
		// tool_choice on a request without any.
		if isSet(r.ParallelToolCalls) {
			out["parallel_tool_calls"] = r.ParallelToolCalls
		}
	}
	if isSet(r.MaxOutputTokens) {
		field := q.TokenLimitField
		if field == "" {
			field = profiles.TokenLimitMaxCompletionTokens
		}
		out[field] = r.MaxOutputTokens
	}
	if r.Text != nil {
		if err := textFormat(r.Text, out); err != nil {
			return nil, err
		}
	}
	if r.Reasoning != nil && isSet(r.Reasoning.Effort) {
		out["reasoning_effort"] = r.Reasoning.Effort
	}
	if isSet(r.TopLogprobs) && string(r.TopLogprobs) != "0" {
		out["logprobs"], out["top_logprobs"] = true, r.TopLogprobs
	}
	if r.Stream {
		out["stream"] = true
		if !q.NoStreamOptions {
			out["stream_options"] = map[string]bool{"include_usage": true}
		}
	}
	for k, v := range q.ExtraBody {
		out[k] = v
	}
	for _, k := range q.DropFields {
		delete(out, k)
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat completions request: %w", err)
	}
	return enc, nil
}

func isSet(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func convertTool(i int, t tool) (chatTool, error) {
	if t.Type != "function" {
		return chatTool{}, reqErr(fmt.Sprintf("tools[%d].type", i), CodeUnsupported,
			"tool type %q is served by the Responses API only; a Chat Completions backend takes function tools", t.Type)
	}
	f := chatFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}
	if t.Function != nil && f.Name == "" {
		f = chatFunction{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict}
	}
	if f.Name == "" {
		return chatTool{}, reqErr(fmt.Sprintf("tools[%d].name", i), "missing_required_parameter", "function tool %d has no name", i)
	}
	if !isSet(f.Parameters) {
		f.Parameters = nil
	}
	if !isSet(f.Strict) {
		f.Strict = nil
	}
	return chatTool{Type: "function", Function: f}, nil
}

// toolChoice maps the Responses tool_choice: modes as they are, a function
// selector and an allowed_tools list nested the Chat Completions way.
func toolChoice(raw json.RawMessage) (any, error) {
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return mode, nil
		}
		return nil, reqErr("tool_choice", "invalid_value", "tool_choice %q: want auto, none, required or a function", mode)
	}
	var sel struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Mode     string `json:"mode"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &sel); err != nil {
		return nil, reqErr("tool_choice", "invalid_value", "tool_choice: %v", err)
	}
	type named struct {
		Name string `json:"name"`
	}
	type fn struct {
		Type     string `json:"type"`
		Function named  `json:"function"`
	}
	switch sel.Type {
	case "function":
		name := sel.Name
		if name == "" && sel.Function != nil {
			name = sel.Function.Name
		}
		if name == "" {
			return nil, reqErr("tool_choice.name", "missing_required_parameter", "tool_choice names no function")
		}
		return fn{Type: "function", Function: named{Name: name}}, nil
	case "allowed_tools":
		tools := make([]fn, 0, len(sel.Tools))
		for _, t := range sel.Tools {
			if t.Type != "function" {
				return nil, reqErr("tool_choice.tools", CodeUnsupported, "allowed tool of type %q: a Chat Completions backend takes function tools", t.Type)
			}
			tools = append(tools, fn{Type: "function", Function: named{Name: t.Name}})
		}
		return map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": sel.Mode, "tools": tools}}, nil
	}
	return nil, reqErr("tool_choice.type", CodeUnsupported, "tool_choice of type %q is served by the Responses API only", sel.Type)
}

// textFormat maps text.format to response_format and text.verbosity to verbosity.
func textFormat(t *textConfig, out map[string]any) error {
	if isSet(t.Verbosity) {
		out["verbosity"] = t.Verbosity
	}
	if t.Format == nil {
		return nil
	}
	switch t.Format.Type {
	case "", "text":
	case "json_object":
		out["response_format"] = map[string]string{"type": "json_object"}
	case "json_schema":
		js := map[string]any{"name": t.Format.Name}
		if isSet(t.Format.Schema) {
			js["schema"] = t.Format.Schema
		}
		if isSet(t.Format.Strict) {
			js["strict"] = t.Format.Strict
		}
		if t.Format.Description != "" {
			js["description"] = t.Format.Description
		}
		out["response_format"] = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		return reqErr("text.format.type", CodeUnsupported, "text.format %q has no Chat Completions form", t.Format.Type)
	}
	return nil
}

// inputItem is the subset of a Responses input item the translation reads.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputPart is a Responses content part.
type inputPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL string          `json:"image_url"`
	FileID   string          `json:"file_id"`
	Detail   string          `json:"detail"`
	FileData string          `json:"file_data"`
	Filename string          `json:"filename"`
	FileURL  string          `json:"file_url"`
	Audio    json.RawMessage `json:"input_audio"`
}

// messageBuilder turns Responses items into messages in order.
type messageBuilder struct {
	q     profiles.Chat
	msgs  []Message
	known map[string]bool // call ids of the assistant tool calls so far
}

func (b *messageBuilder) role(r string) string {
	if r == "developer" && !b.q.DeveloperRole {
		return "system"
	}
	return r
}

// instructions become the first message: a string as one system (or
// developer, per profile) message, an item array as messages.
func (b *messageBuilder) instructions(raw json.RawMessage) error {
	if !isSet(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "" {
			role := b.q.InstructionsRole
			if role == "" {
				role = "system"
			}
			b.msgs = append(b.msgs, Message{Role: b.role(role), Content: s})
		}
		return nil
	}
	return b.items("instructions", raw)
}

func (b *messageBuilder) input(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if !isSet(raw) {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return reqErr("input", "invalid_type", "input: %v", err)
		}
		b.msgs = append(b.msgs, Message{Role: "user", Content: s})
		return nil
	}
	return b.items("input", raw)
}

func (b *messageBuilder) items(field string, raw json.RawMessage) error {
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return reqErr(field, "invalid_type", "%s must be a string or an array of items: %v", field, err)
	}
	for i, it := range items {
		param := fmt.Sprintf("%s[%d]", field, i)
		var err error
		switch it.Type {
		case "", "message":
			err = b.message(param, it)
		case "function_call":
			err = b.call(param, it)
		case "function_call_output":
			err = b.output(param, it)
		case "reasoning":
			// The model's reasoning is not sent back: Chat Completions
			// input has no place for it (DeepSeek refuses it outright).
		default:
			err = reqErr(param+".type", CodeUnsupported, "input item of type %q has no Chat Completions form", it.Type)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *messageBuilder) message(param string, it inputItem) error {
	var text string
	if c := bytes.TrimSpace(it.Content); len(c) == 0 || c[0] != '[' {
		if isSet(c) {
			if err := json.Unmarshal(c, &text); err != nil {
				return reqErr(param+".content", "invalid_type", "content must be a string or an array of parts: %v", err)
			}
		}
		if it.Role == "assistant" || it.Role == "user" || it.Role == "system" || it.Role == "developer" {
			b.msgs = append(b.msgs, Message{Role: b.role(it.Role), Content: text})
			return nil
		}
		return reqErr(param+".role", "invalid_value", "message role %q", it.Role)
	}
	var parts []inputPart
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return reqErr(param+".content", "invalid_type", "content must be a string or an array of parts: %v", err)
	}
	switch it.Role {
	case "assistant":
		var texts []string
		m := Message{Role: "assistant"}
		for _, p := range parts {
			switch p.Type {
			case "output_text", "input_text", "text":
				texts = append(texts, p.Text)
			case "refusal":
				r := p.Refusal
				m.Refusal = &r
			default:
				return reqErr(param+".content", CodeUnsupported, "assistant content part %q has no Chat Completions form", p.Type)
			}
		}
		if len(texts) > 0 || m.Refusal == nil {
			m.Content = strings.Join(texts, "")
		}
		b.msgs = append(b.msgs, m)
	case "system", "developer":
		texts, ok := allText(parts)
		if !ok {
			return reqErr(param+".content", CodeUnsupported, "a %s message takes text parts only", it.Role)
		}
		b.msgs = append(b.msgs, Message{Role: b.role(it.Role), Content: strings.Join(texts, "\n\n")})
	case "user":
		c, err := b.userContent(param, parts)
		if err != nil {
			return err
		}
		b.msgs = append(b.msgs, Message{Role: "user", Content: c})
	default:
		return reqErr(param+".role", "invalid_value", "message role %q", it.Role)
	}
	return nil
}

func allText(parts []inputPart) ([]string, bool) {
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
			return nil, false
		}
		texts = append(texts, p.Text)
	}
	return texts, true
}

// userContent keeps a user message's parts: one text part as a string,
// several as text parts (the AGN-002 context block stays its own part,
// exactly as rendered) unless the profile flattens them, images as
// image_url parts, files as file parts, audio as input_audio parts.
func (b *messageBuilder) userContent(param string, parts []inputPart) (any, error) {
	if texts, ok := allText(parts); ok {
		if len(texts) == 1 {
			return texts[0], nil
		}
		if b.q.FlattenText {
			return strings.Join(texts, "\n\n"), nil
		}
	}
	out := make([]map[string]any, 0, len(parts))
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "input_text", "text", "output_text":
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case "input_image":
			if p.ImageURL == "" {
				return nil, reqErr(pp, CodeUnsupported, "an input_image by file_id has no Chat Completions form: send image_url (an https or data: URL)")
			}
			img := map[string]any{"url": p.ImageURL}
			if p.Detail != "" {
				img["detail"] = p.Detail
			}
			out = append(out, map[string]any{"type": "image_url", "image_url": img})
		case "input_file":
			if p.FileURL != "" {
				return nil, reqErr(pp, CodeUnsupported, "an input_file by file_url has no Chat Completions form: send file_data or file_id")
			}
			f := map[string]any{}
			for k, v := range map[string]string{"file_id": p.FileID, "file_data": p.FileData, "filename": p.Filename} {
				if v != "" {
					f[k] = v
				}
			}
			out = append(out, map[string]any{"type": "file", "file": f})
		case "input_audio":
			out = append(out, map[string]any{"type": "input_audio", "input_audio": p.Audio})
		default:
			return nil, reqErr(pp, CodeUnsupported, "user content part %q has no Chat Completions form", p.Type)
		}
	}
	return out, nil
}

// call adds a function_call to the assistant message it belongs to: the
// one just before (its text, or the calls made beside it), else a new one
// with null content.
func (b *messageBuilder) call(param string, it inputItem) error {
	if it.CallID == "" || it.Name == "" {
		return reqErr(param, "missing_required_parameter", "a function_call needs call_id and name")
	}
	args, err := argumentString(it.Arguments)
	if err != nil {
		return reqErr(param+".arguments", "invalid_type", "%v", err)
	}
	tc := ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: it.Name, Arguments: args}}
	b.known[it.CallID] = true
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == "assistant" {
		last := &b.msgs[n-1]
		if s, ok := last.Content.(string); ok && s == "" && len(last.ToolCalls) == 0 {
			last.Content = nil
		}
		last.ToolCalls = append(last.ToolCalls, tc)
		return nil
	}
	b.msgs = append(b.msgs, Message{Role: "assistant", Content: nil, ToolCalls: []ToolCall{tc}})
	return nil
}

// argumentString is a call's arguments as the JSON string Chat Completions
// wants; some clients and servers send an object instead.
func argumentString(raw json.RawMessage) (string, error) {
	if !isSet(raw) {
		return "{}", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return "{}", nil // a call without arguments; servers refuse ""
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("arguments are neither a string nor JSON: %w", err)
	}
	return buf.String(), nil
}

// output adds a function_call_output as a tool message answering its call.
// An output whose call is not in the conversation (tool-call emulation
// keeps the model's own text, not function_call items; a client may send
// an output alone) cannot be a tool message, which must answer an
// assistant tool call: it goes as a user message that names the call.
func (b *messageBuilder) output(param string, it inputItem) error {
	if it.CallID == "" {
		return reqErr(param+".call_id", "missing_required_parameter", "a function_call_output needs call_id")
	}
	text, err := toolOutputText(it.Output)
	if err != nil {
		return reqErr(param+".output", CodeUnsupported, "%v", err)
	}
	if !b.known[it.CallID] {
		b.msgs = append(b.msgs, Message{Role: "user", Content: "Output of tool call " + it.CallID + ":\n" + text})
		return nil
	}
	b.msgs = append(b.msgs, Message{Role: "tool", ToolCallID: it.CallID, Content: text})
	return nil
}

// toolOutputText is a function_call_output's output as text: a string as it
// is, a part array's text parts joined (a tool message carries text only).
func toolOutputText(raw json.RawMessage) (string, error) {
	if !isSet(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []inputPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return string(raw), nil
	}
	texts, ok := allText(parts)
	if !ok {
		return "", fmt.Errorf("a tool output with non-text parts has no Chat Completions form (a tool message carries text)")
	}
	return strings.Join(texts, "\n"), nil
}
