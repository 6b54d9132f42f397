// Package chat is the gateway's Chat Completions codec (docs/http-api.md#chat-completions):
// it parses a POST /v1/chat/completions body and says it as the Responses
// create request the gateway already runs, so a chat request is the same
// durable turn as a Responses create (budgets, usage, cost, console,
// replay, events); and it encodes that turn's response as a
// chat.completion, or its events as chat.completion.chunk SSE. It imports
// no HTTP or NATS package: every rule is table-tested as plain Go.
//
// A chat request carries its whole history and needs no server state, so
// its Responses form has no previous_response_id or conversation, and
// store false (no response record; the turn's events stay, for the
// console and replay).
package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Request is a parsed chat completions request.
type Request struct {
	Model string
	// Stream and IncludeUsage are stream and stream_options.include_usage.
	Stream, IncludeUsage bool
	// Body is the client's body as sent: a Chat Completions backend gets it
	// in place of the translation of Create (contracts.OpenAIPassthrough.Chat).
	Body json.RawMessage
	// Create is the Responses create body the request means.
	Create json.RawMessage
	// ChatOnly are the parameters the request sent that Responses has no
	// equivalent of (stop, seed, …), as sent: a Chat Completions backend
	// gets them, a Responses backend names them in X-Aptix-Ignored-Params.
	ChatOnly map[string]json.RawMessage
	// Unsent names what the request sent that has no place in a Responses
	// request and is not a top-level parameter (a message's name).
	Unsent []string
}

// IgnoredOnResponses names what a Responses backend does not get: the
// chat-only parameters and the unsent parts, sorted.
func (r *Request) IgnoredOnResponses() []string {
	out := slices.Clone(r.Unsent)
	for k := range r.ChatOnly {
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mapped are the parameters said in the Responses request (under their
// own name or another); chatOnly those it has no equivalent of; refused
// those a 400 explains. Anything else is OpenAI's unknown_parameter.
var (
	mapped = map[string]bool{
		"model": true, "messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
		"response_format": true, "max_tokens": true, "max_completion_tokens": true, "temperature": true,
		"top_p": true, "user": true, "reasoning_effort": true, "metadata": true, "stream": true,
		"stream_options": true, "n": true, "frequency_penalty": true, "presence_penalty": true,
		"top_logprobs": true, "service_tier": true, "prompt_cache_key": true, "safety_identifier": true,
		"verbosity": true,
	}
	chatOnly = map[string]bool{
		"stop": true, "seed": true, "logit_bias": true, "logprobs": true, "store": true,
		"modalities": true, "audio": true, "prediction": true, "web_search_options": true,
	}
	// passed keep their name and value in the Responses request.
	passed = []string{"temperature", "top_p", "user", "parallel_tool_calls", "frequency_penalty",
		"presence_penalty", "top_logprobs", "service_tier", "prompt_cache_key", "safety_identifier"}
)

func bad(param, code, format string, args ...any) *responses.Error {
	return responses.BadRequest(param, code, fmt.Sprintf(format, args...))
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// Parse reads a chat completions body. Errors are OpenAI's: malformed JSON
// names the position, an unknown parameter names it, n > 1 says it is not
// served, a value of the wrong type names the parameter and the type.
func Parse(data []byte) (*Request, *responses.Error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, responses.JSONError(data, err)
	}
	if raw == nil {
		return nil, bad("", responses.CodeInvalidJSON, "The request body must be a JSON object.")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names) // the first unknown parameter reported is stable
	for _, k := range names {
		switch {
		case k == "functions" || k == "function_call":
			return nil, bad(k, responses.CodeUnknownParameter, "'%s' is deprecated and not served: send 'tools' and 'tool_choice'.", k)
		case !mapped[k] && !chatOnly[k]:
			return nil, bad(k, responses.CodeUnknownParameter, "Unrecognized request argument supplied: %s", k)
		}
	}
	r := &Request{Body: data, ChatOnly: map[string]json.RawMessage{}}
	create := map[string]any{"store": false}
	var e *responses.Error
	field := func(name string, dst any, want string) bool {
		v, ok := raw[name]
		if e != nil || !ok || isNull(v) {
			return false
		}
		if json.Unmarshal(v, dst) != nil {
			e = bad(name, responses.CodeInvalidType, "Invalid type for '%s': expected %s.", name, want)
			return false
		}
		return true
	}
	var n int
	var maxTokens, maxCompletion int
	var effort string
	var metadata map[string]string
	var streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	field("model", &r.Model, "a string")
	field("stream", &r.Stream, "a boolean")
	field("stream_options", &streamOptions, "an object")
	if field("n", &n, "an integer") && n != 1 {
		return nil, bad("n", responses.CodeInvalidValue, "Invalid 'n': %d. Aptix serves one choice per request (n = 1); send the request %d times for %d completions.", n, max(n, 1), max(n, 1))
	}
	hasMax := field("max_tokens", &maxTokens, "an integer")
	hasMaxCompletion := field("max_completion_tokens", &maxCompletion, "an integer")
	hasEffort := field("reasoning_effort", &effort, "a string")
	hasMetadata := field("metadata", &metadata, "an object of strings")
	if e != nil {
		return nil, e
	}
	r.IncludeUsage = r.Stream && streamOptions.IncludeUsage
	if r.Model != "" {
		create["model"] = r.Model
	}
	if r.Stream {
		create["stream"] = true
	}
	switch {
	case hasMaxCompletion:
		create["max_output_tokens"] = maxCompletion
	case hasMax:
		create["max_output_tokens"] = maxTokens
	}
	if v, ok := create["max_output_tokens"].(int); ok && v < 1 {
		p := "max_tokens"
		if hasMaxCompletion {
			p = "max_completion_tokens"
		}
		return nil, bad(p, responses.CodeInvalidValue, "Invalid '%s': integer below minimum value 1.", p)
	}
	if hasEffort {
		create["reasoning"] = map[string]string{"effort": effort}
	}
	if hasMetadata {
		create["metadata"] = metadata
	}
	for _, k := range passed {
		if v, ok := raw[k]; ok && !isNull(v) {
			create[k] = v
		}
	}
	for k, v := range raw {
		if chatOnly[k] && !isNull(v) {
			r.ChatOnly[k] = v
		}
	}
	if text, e := textConfig(raw["response_format"], raw["verbosity"]); e != nil {
		return nil, e
	} else if text != nil {
		create["text"] = text
	}
	if v := raw["tools"]; !isNull(v) {
		tools, e := convertTools(v)
		if e != nil {
			return nil, e
		}
		create["tools"] = tools
	}
	if v := raw["tool_choice"]; !isNull(v) {
		tc, e := convertToolChoice(v)
		if e != nil {
			return nil, e
		}
		create["tool_choice"] = tc
	}
	input, unsent, e := convertMessages(raw["messages"])
	if e != nil {
		return nil, e
	}
	create["input"], r.Unsent = input, unsent
	b, err := json.Marshal(create)
	if err != nil {
		return nil, responses.Internal("encode_request", err.Error())
	}
	r.Create = b
	return r, nil
}

// textConfig is the Responses text parameter: response_format as
// text.format (json_schema flattened), verbosity as text.verbosity.
func textConfig(format, verbosity json.RawMessage) (map[string]any, *responses.Error) {
	if isNull(format) && isNull(verbosity) {
		return nil, nil
	}
	text := map[string]any{}
	if !isNull(verbosity) {
		text["verbosity"] = verbosity
	}
	if isNull(format) {
		return text, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      json.RawMessage `json:"strict"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(format, &rf) != nil {
		return nil, bad("response_format", responses.CodeInvalidType, "Invalid type for 'response_format': expected an object.")
	}
	switch rf.Type {
	case "text", "json_object":
		text["format"] = map[string]string{"type": rf.Type}
	case "json_schema":
		js := rf.JSONSchema
		if js == nil || js.Name == "" {
			return nil, bad("response_format.json_schema.name", responses.CodeMissingParameter, "Missing required parameter: 'response_format.json_schema.name'.")
		}
		f := map[string]any{"type": "json_schema", "name": js.Name}
		if !isNull(js.Schema) {
			f["schema"] = js.Schema
		}
		if !isNull(js.Strict) {
			f["strict"] = js.Strict
		}
		if js.Description != nil {
			f["description"] = *js.Description
		}
		text["format"] = f
	case "":
		return nil, bad("response_format.type", responses.CodeMissingParameter, "Missing required parameter: 'response_format.type'.")
	default:
		return nil, bad("response_format.type", responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", rf.Type)
	}
	return text, nil
}

// function is a Chat Completions function definition.
type function struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// flatTool is a Responses function tool.
type flatTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// convertTools flattens {"type":"function","function":{…}} into the
// Responses shape; other tool types have no Responses twin here.
func convertTools(v json.RawMessage) ([]flatTool, *responses.Error) {
	var tools []struct {
		Type     string    `json:"type"`
		Function *function `json:"function"`
	}
	if json.Unmarshal(v, &tools) != nil {
		return nil, bad("tools", responses.CodeInvalidType, "Invalid type for 'tools': expected an array of tool objects.")
	}
	out := make([]flatTool, 0, len(tools))
	for i, t := range tools {
		if t.Type != "function" {
			return nil, bad(fmt.Sprintf("tools[%d].type", i), responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'function'.", t.Type)
		}
		if t.Function == nil || t.Function.Name == "" {
			return nil, bad(fmt.Sprintf("tools[%d].function.name", i), responses.CodeMissingParameter, "Missing required parameter: 'tools[%d].function.name'.", i)
		}
		f := t.Function
		ft := flatTool{Type: "function", Name: f.Name, Description: f.Description, Parameters: f.Parameters, Strict: f.Strict}
		if isNull(ft.Parameters) {
			ft.Parameters = nil
		}
		if isNull(ft.Strict) {
			ft.Strict = nil
		}
		out = append(out, ft)
	}
	return out, nil
}

// convertToolChoice maps tool_choice: the modes as they are, a named
// function flat, an allowed_tools list flat.
func convertToolChoice(v json.RawMessage) (any, *responses.Error) {
	var mode string
	if json.Unmarshal(v, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return mode, nil
		}
		return nil, bad("tool_choice", responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", mode)
	}
	type named struct {
		Name string `json:"name"`
	}
	var tc struct {
		Type         string `json:"type"`
		Function     *named `json:"function"`
		AllowedTools *struct {
			Mode  string `json:"mode"`
			Tools []struct {
				Type     string `json:"type"`
				Function *named `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
	}
	if json.Unmarshal(v, &tc) != nil {
		return nil, bad("tool_choice", responses.CodeInvalidType, "Invalid type for 'tool_choice': expected a string or an object.")
	}
	switch tc.Type {
	case "function":
		if tc.Function == nil || tc.Function.Name == "" {
			return nil, bad("tool_choice.function.name", responses.CodeMissingParameter, "Missing required parameter: 'tool_choice.function.name'.")
		}
		return map[string]string{"type": "function", "name": tc.Function.Name}, nil
	case "allowed_tools":
		if tc.AllowedTools == nil {
			return nil, bad("tool_choice.allowed_tools", responses.CodeMissingParameter, "Missing required parameter: 'tool_choice.allowed_tools'.")
		}
		tools := make([]map[string]string, 0, len(tc.AllowedTools.Tools))
		for i, t := range tc.AllowedTools.Tools {
			if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
				return nil, bad(fmt.Sprintf("tool_choice.allowed_tools.tools[%d]", i), responses.CodeInvalidValue, "Invalid 'tool_choice.allowed_tools.tools[%d]': expected a function with a name.", i)
			}
			tools = append(tools, map[string]string{"type": "function", "name": t.Function.Name})
		}
		return map[string]any{"type": "allowed_tools", "mode": tc.AllowedTools.Mode, "tools": tools}, nil
	}
	return nil, bad("tool_choice.type", responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'function' and 'allowed_tools'.", tc.Type)
}

// message is a Chat Completions message.
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       json.RawMessage `json:"name"`
	Refusal    *string         `json:"refusal"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// part is a content part.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	InputAudio json.RawMessage `json:"input_audio"`
	File       *struct {
		FileID   string `json:"file_id"`
		FileData string `json:"file_data"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// Responses input items, fields in a fixed order.
type (
	inputMessage struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	functionCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	functionOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// convertMessages says messages as Responses input items, in order:
// system and developer messages stay messages of their role (never
// instructions: the model sees them where the client put them), user and
// assistant messages are messages, an assistant's tool_calls are
// function_call items after its text, a tool message is the
// function_call_output of its call. unsent names what has no Responses
// place (a message's name).
func convertMessages(v json.RawMessage) (items []any, unsent []string, e *responses.Error) {
	if isNull(v) {
		return nil, nil, bad("messages", responses.CodeMissingParameter, "Missing required parameter: 'messages'.")
	}
	var msgs []json.RawMessage
	if json.Unmarshal(v, &msgs) != nil {
		return nil, nil, bad("messages", responses.CodeInvalidType, "Invalid type for 'messages': expected an array of message objects.")
	}
	if len(msgs) == 0 {
		return nil, nil, bad("messages", responses.CodeInvalidValue, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, raw := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		var m message
		if err := json.Unmarshal(raw, &m); err != nil || bytes.TrimSpace(raw)[0] != '{' {
			return nil, nil, bad(p, responses.CodeInvalidType, "Invalid type for '%s': expected a message object.", p)
		}
		if !isNull(m.Name) {
			unsent = append(unsent, "messages[].name")
		}
		switch m.Role {
		case "system", "developer":
			text, e := textOnly(p, m.Content)
			if e != nil {
				return nil, nil, e
			}
			items = append(items, inputMessage{"message", m.Role, text})
		case "user":
			content, e := userContent(p, m.Content)
			if e != nil {
				return nil, nil, e
			}
			items = append(items, inputMessage{"message", "user", content})
		case "assistant":
			its, e := assistantItems(p, m)
			if e != nil {
				return nil, nil, e
			}
			items = append(items, its...)
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, bad(p+".tool_call_id", responses.CodeMissingParameter, "Missing required parameter: '%s.tool_call_id'.", p)
			}
			text, e := textOnly(p, m.Content)
			if e != nil {
				return nil, nil, e
			}
			items = append(items, functionOutput{"function_call_output", m.ToolCallID, text})
		case "":
			return nil, nil, bad(p+".role", responses.CodeMissingParameter, "Missing required parameter: '%s.role'.", p)
		default:
			return nil, nil, bad(p+".role", responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", m.Role)
		}
	}
	slices.Sort(unsent)
	return items, slices.Compact(unsent), nil
}

// parts reads content: a string (one text) or an array of parts.
func parts(p string, content json.RawMessage) (s *string, ps []part, e *responses.Error) {
	var str string
	if json.Unmarshal(content, &str) == nil {
		return &str, nil, nil
	}
	if json.Unmarshal(content, &ps) != nil {
		return nil, nil, bad(p+".content", responses.CodeInvalidType, "Invalid type for '%s.content': expected a string or an array of content parts.", p)
	}
	return nil, ps, nil
}

// textOnly is a system, developer or tool message's content as one text:
// a string as it is, text parts joined.
func textOnly(p string, content json.RawMessage) (string, *responses.Error) {
	if isNull(content) {
		return "", bad(p+".content", responses.CodeMissingParameter, "Missing required parameter: '%s.content'.", p)
	}
	s, ps, e := parts(p, content)
	if e != nil || s != nil {
		if s == nil {
			return "", e
		}
		return *s, nil
	}
	texts := make([]string, 0, len(ps))
	for j, pt := range ps {
		if pt.Type != "text" {
			return "", bad(fmt.Sprintf("%s.content[%d].type", p, j), responses.CodeInvalidValue, "Invalid value: '%s'. This message takes text parts only.", pt.Type)
		}
		texts = append(texts, pt.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// userContent keeps a user message's parts: a string as it is; text,
// image_url, input_audio and file parts as their Responses input parts.
func userContent(p string, content json.RawMessage) (any, *responses.Error) {
	if isNull(content) {
		return nil, bad(p+".content", responses.CodeMissingParameter, "Missing required parameter: '%s.content'.", p)
	}
	s, ps, e := parts(p, content)
	if e != nil {
		return nil, e
	}
	if s != nil {
		return *s, nil
	}
	out := make([]map[string]any, 0, len(ps))
	for j, pt := range ps {
		pp := fmt.Sprintf("%s.content[%d]", p, j)
		switch pt.Type {
		case "text":
			out = append(out, map[string]any{"type": "input_text", "text": pt.Text})
		case "image_url":
			if pt.ImageURL == nil || pt.ImageURL.URL == "" {
				return nil, bad(pp+".image_url.url", responses.CodeMissingParameter, "Missing required parameter: '%s.image_url.url'.", pp)
			}
			img := map[string]any{"type": "input_image", "image_url": pt.ImageURL.URL, "detail": "auto"}
			if pt.ImageURL.Detail != "" {
				img["detail"] = pt.ImageURL.Detail
			}
			out = append(out, img)
		case "input_audio":
			out = append(out, map[string]any{"type": "input_audio", "input_audio": pt.InputAudio})
		case "file":
			if pt.File == nil {
				return nil, bad(pp+".file", responses.CodeMissingParameter, "Missing required parameter: '%s.file'.", pp)
			}
			f := map[string]any{"type": "input_file"}
			for k, v := range map[string]string{"file_id": pt.File.FileID, "file_data": pt.File.FileData, "filename": pt.File.Filename} {
				if v != "" {
					f[k] = v
				}
			}
			out = append(out, f)
		default:
			return nil, bad(pp+".type", responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', and 'file'.", pt.Type)
		}
	}
	return out, nil
}

// assistantItems is an assistant message: its text (or refusal) as an
// assistant message, then its tool calls as function_call items.
func assistantItems(p string, m message) ([]any, *responses.Error) {
	var items []any
	var texts []string
	refusal := ""
	if m.Refusal != nil {
		refusal = *m.Refusal
	}
	if !isNull(m.Content) {
		s, ps, e := parts(p, m.Content)
		if e != nil {
			return nil, e
		}
		if s != nil {
			texts = append(texts, *s)
		}
		for j, pt := range ps {
			switch pt.Type {
			case "text":
				texts = append(texts, pt.Text)
			case "refusal":
				refusal += pt.Refusal
			default:
				return nil, bad(fmt.Sprintf("%s.content[%d].type", p, j), responses.CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'text' and 'refusal'.", pt.Type)
			}
		}
	}
	text := strings.Join(texts, "")
	switch {
	case refusal != "":
		content := []map[string]any{}
		if text != "" {
			content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}})
		}
		content = append(content, map[string]any{"type": "refusal", "refusal": refusal})
		items = append(items, inputMessage{"message", "assistant", content})
	case text != "" || len(m.ToolCalls) == 0:
		items = append(items, inputMessage{"message", "assistant", text})
	}
	for j, tc := range m.ToolCalls {
		tp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
		if tc.ID == "" {
			return nil, bad(tp+".id", responses.CodeMissingParameter, "Missing required parameter: '%s.id'.", tp)
		}
		if tc.Function.Name == "" {
			return nil, bad(tp+".function.name", responses.CodeMissingParameter, "Missing required parameter: '%s.function.name'.", tp)
		}
		args := "{}"
		if !isNull(tc.Function.Arguments) {
			if json.Unmarshal(tc.Function.Arguments, &args) != nil {
				return nil, bad(tp+".function.arguments", responses.CodeInvalidType, "Invalid type for '%s.function.arguments': expected a string.", tp)
			}
			if strings.TrimSpace(args) == "" {
				args = "{}" // a call without arguments: Responses servers refuse ""
			}
		}
		items = append(items, functionCall{"function_call", tc.ID, tc.Function.Name, args})
	}
	return items, nil
}
