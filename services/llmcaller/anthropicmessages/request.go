// Package anthropicmessages lets the LLM caller serve a turn from an
// Anthropic Messages backend (profile "api": "anthropic-messages",
// docs/backends.md#anthropic-messages): the Responses request the caller
// builds is said as a Messages request (Request), the Messages answer or
// event stream as the Responses body or events the caller reads (Response,
// Stream), and a Messages client's own body is forwarded as it sent it
// (Forward). It is plain Go over bytes; Transport puts it under the
// caller's HTTP client, so retries, pay-once and the stream reader run
// unchanged on top.
//
// Thinking blocks cross as reasoning items: the thinking text as a
// reasoning_text content part, the signature as encrypted_content (a
// redacted_thinking block's data likewise, marked redacted), so a replayed
// history gives Anthropic back every block and signature unchanged.
package anthropicmessages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// RequestError is a Responses request that cannot be said as Messages:
// the transport answers it 400 without calling the backend.
type RequestError struct{ Param, Message string }

func (e *RequestError) Error() string { return e.Message }

func reqErr(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Defaults are what a Messages request needs that a Responses one may not say.
type Defaults struct {
	// MaxTokens is max_tokens when the request has no max_output_tokens.
	MaxTokens int
}

// marshal encodes without HTML escaping, so text and signatures keep their
// bytes (encoding/json would write < as \u003c).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func isSet(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && string(v) != "null"
}

// responsesRequest is the part of a Responses body the translation reads.
type responsesRequest struct {
	Model           string            `json:"model"`
	Instructions    json.RawMessage   `json:"instructions"`
	Input           json.RawMessage   `json:"input"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	ParallelCalls   *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens *int              `json:"max_output_tokens"`
	Temperature     json.RawMessage   `json:"temperature"`
	TopP            json.RawMessage   `json:"top_p"`
	Stream          bool              `json:"stream"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Metadata map[string]string `json:"metadata"`
	User     string            `json:"user"`
	// Stop sequences a chat or Messages client's request added (chat's stop).
	Stop json.RawMessage `json:"stop"`
}

// Block is one Messages content block (or tool) the translation writes.
type Block map[string]any

// Msg is one Messages message.
type Msg struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// budgets are the thinking budgets a reasoning effort asks for.
var budgets = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}

// Request says a Responses request body as a Messages request body:
// instructions and system or developer messages as system text blocks;
// user and assistant messages in order, consecutive ones of a role merged
// (Messages alternates roles); function_call items as the assistant's
// tool_use blocks and function_call_output items as the user's
// tool_result blocks; reasoning items as thinking (or redacted_thinking)
// blocks with their signatures; images and files as image and document
// blocks; max_output_tokens as max_tokens (d.MaxTokens when absent);
// reasoning.effort as thinking with a budget below max_tokens (added to
// d.MaxTokens when the request set no limit).
func Request(body []byte, d Defaults) ([]byte, error) {
	var r responsesRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, reqErr("", "the request body is not a Responses request: %v", err)
	}
	out := map[string]any{"model": r.Model}
	var system []any
	if isSet(r.Instructions) {
		var s string
		if json.Unmarshal(r.Instructions, &s) == nil && s != "" {
			system = append(system, Block{"type": "text", "text": s})
		}
	}
	msgs, sys, err := messages(r.Input)
	if err != nil {
		return nil, err
	}
	system = append(system, sys...)
	if len(system) > 0 {
		out["system"] = system
	}
	out["messages"] = msgs
	maxTokens := d.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 8192
	}
	limited := r.MaxOutputTokens != nil && *r.MaxOutputTokens > 0
	if limited {
		maxTokens = *r.MaxOutputTokens
	}
	if r.Reasoning != nil {
		if b, ok := budgets[r.Reasoning.Effort]; ok {
			// The budget counts within max_tokens: a request that set no
			// limit gets the budget on top of the profile's default, one
			// that did keeps its limit and thinks within it.
			if !limited {
				maxTokens += b
			}
			b = min(b, maxTokens-1)
			if b >= 1024 {
				out["thinking"] = map[string]any{"type": "enabled", "budget_tokens": b}
			}
		}
	}
	out["max_tokens"] = maxTokens
	if isSet(r.Temperature) {
		out["temperature"] = r.Temperature
	}
	if isSet(r.TopP) {
		out["top_p"] = r.TopP
	}
	if isSet(r.Stop) {
		var one string
		if json.Unmarshal(r.Stop, &one) == nil {
			out["stop_sequences"] = []string{one}
		} else {
			out["stop_sequences"] = r.Stop
		}
	}
	if r.User != "" {
		out["metadata"] = map[string]string{"user_id": r.User}
	}
	if r.Stream {
		out["stream"] = true
	}
	if len(r.Tools) > 0 {
		tools, err := convertTools(r.Tools)
		if err != nil {
			return nil, err
		}
		if len(tools) > 0 {
			out["tools"] = tools
		}
	}
	if tc, err := toolChoice(r.ToolChoice, r.ParallelCalls); err != nil {
		return nil, err
	} else if tc != nil && out["tools"] != nil {
		out["tool_choice"] = tc
	}
	return marshal(out)
}

func convertTools(raw []json.RawMessage) ([]any, error) {
	var out []any
	for i, t := range raw {
		var ft struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(t, &ft); err != nil {
			return nil, reqErr(fmt.Sprintf("tools[%d]", i), "tools[%d] is not a tool object: %v", i, err)
		}
		if ft.Type != "function" {
			return nil, reqErr(fmt.Sprintf("tools[%d].type", i), "a Messages backend takes function tools only, not %q", ft.Type)
		}
		tool := Block{"name": ft.Name}
		if ft.Description != "" {
			tool["description"] = ft.Description
		}
		schema := ft.Parameters
		if !isSet(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tool["input_schema"] = schema
		out = append(out, tool)
	}
	return out, nil
}

// toolChoice maps auto, none, required (any) and a named function (tool);
// parallel_tool_calls false is disable_parallel_tool_use.
func toolChoice(raw json.RawMessage, parallel *bool) (map[string]any, error) {
	var tc map[string]any
	var mode string
	switch {
	case !isSet(raw):
		if parallel == nil || *parallel {
			return nil, nil
		}
		tc = map[string]any{"type": "auto"}
	case json.Unmarshal(raw, &mode) == nil:
		switch mode {
		case "auto":
			tc = map[string]any{"type": "auto"}
		case "none":
			tc = map[string]any{"type": "none"}
		case "required":
			tc = map[string]any{"type": "any"}
		default:
			return nil, reqErr("tool_choice", "tool_choice %q has no Messages equivalent", mode)
		}
	default:
		var named struct {
			Type, Name string
		}
		if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Name == "" {
			return nil, reqErr("tool_choice", "tool_choice %s has no Messages equivalent", raw)
		}
		tc = map[string]any{"type": "tool", "name": named.Name}
	}
	if parallel != nil && !*parallel && tc["type"] != "none" {
		tc["disable_parallel_tool_use"] = true
	}
	return tc, nil
}

// item is the part of a Responses input item the translation reads.
type item struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
	Redacted         bool            `json:"redacted"`
	Summary          []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// part is a Responses content part.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileData string `json:"file_data"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// messages says the input items as messages, and system or developer
// messages as system blocks.
func messages(input json.RawMessage) (msgs []Msg, system []any, err error) {
	if !isSet(input) {
		return nil, nil, reqErr("input", "a Messages request needs at least one message")
	}
	var s string
	if json.Unmarshal(input, &s) == nil {
		return []Msg{{Role: "user", Content: []any{Block{"type": "text", "text": s}}}}, nil, nil
	}
	var items []item
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, nil, reqErr("input", "input is neither a string nor a list of items: %v", err)
	}
	add := func(role string, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			return
		}
		msgs = append(msgs, Msg{Role: role, Content: blocks})
	}
	for i, it := range items {
		switch it.Type {
		case "message", "":
			blocks, err := contentBlocks(fmt.Sprintf("input[%d]", i), it.Content)
			if err != nil {
				return nil, nil, err
			}
			switch it.Role {
			case "system", "developer":
				system = append(system, blocks...)
			case "assistant":
				add("assistant", blocks...)
			default:
				add("user", blocks...)
			}
		case "function_call":
			var input json.RawMessage = json.RawMessage("{}")
			if strings.TrimSpace(it.Arguments) != "" {
				if !json.Valid([]byte(it.Arguments)) {
					return nil, nil, reqErr(fmt.Sprintf("input[%d].arguments", i), "function_call %s has arguments that are not JSON", it.CallID)
				}
				input = json.RawMessage(it.Arguments)
			}
			add("assistant", Block{"type": "tool_use", "id": it.CallID, "name": it.Name, "input": input})
		case "function_call_output":
			res := Block{"type": "tool_result", "tool_use_id": it.CallID}
			var out string
			if json.Unmarshal(it.Output, &out) == nil {
				res["content"] = out
			} else if blocks, err := contentBlocks(fmt.Sprintf("input[%d].output", i), it.Output); err == nil {
				res["content"] = blocks
			} else {
				return nil, nil, err
			}
			add("user", res)
		case "reasoning":
			if b := thinkingBlock(it); b != nil {
				add("assistant", b)
			}
		default:
			// Server-side tool items (web search, MCP, …) have no Messages
			// form a backend would accept: they stay out.
		}
	}
	return msgs, system, nil
}

// thinkingBlock is a reasoning item as the block it came from: a
// signature (encrypted_content) is what Anthropic needs back; a reasoning
// item without one came from another backend and is not sent (Anthropic
// refuses a thinking block it did not sign).
func thinkingBlock(it item) Block {
	if it.EncryptedContent == nil || *it.EncryptedContent == "" {
		return nil
	}
	if it.Redacted {
		return Block{"type": "redacted_thinking", "data": *it.EncryptedContent}
	}
	var parts []part
	_ = json.Unmarshal(it.Content, &parts)
	var text strings.Builder
	for _, p := range parts {
		text.WriteString(p.Text)
	}
	return Block{"type": "thinking", "thinking": text.String(), "signature": *it.EncryptedContent}
}

// contentBlocks says a message's content as Messages blocks.
func contentBlocks(p string, content json.RawMessage) ([]any, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []any{Block{"type": "text", "text": s}}, nil
	}
	var parts []part
	if err := json.Unmarshal(content, &parts); err != nil {
		return nil, reqErr(p+".content", "%s.content is neither a string nor a list of parts: %v", p, err)
	}
	var out []any
	for j, pt := range parts {
		switch pt.Type {
		case "input_text", "output_text", "text":
			if pt.Text != "" {
				out = append(out, Block{"type": "text", "text": pt.Text})
			}
		case "refusal":
			out = append(out, Block{"type": "text", "text": pt.Refusal})
		case "input_image":
			src, err := source(pt.ImageURL)
			if err != nil {
				return nil, reqErr(fmt.Sprintf("%s.content[%d].image_url", p, j), "%v", err)
			}
			out = append(out, Block{"type": "image", "source": src})
		case "input_file":
			data := cmpOr(pt.FileData, pt.FileURL)
			if data == "" {
				return nil, reqErr(fmt.Sprintf("%s.content[%d]", p, j), "a file sent by id has no Messages form: send file_data or file_url")
			}
			src, err := source(data)
			if err != nil {
				return nil, reqErr(fmt.Sprintf("%s.content[%d].file_data", p, j), "%v", err)
			}
			out = append(out, Block{"type": "document", "source": src})
		default:
			return nil, reqErr(fmt.Sprintf("%s.content[%d].type", p, j), "content part %q has no Messages form", pt.Type)
		}
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// source is an image or document source: a data: URL as base64, any other
// URL as a url source.
func source(u string) (map[string]any, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		mt, data, ok := strings.Cut(rest, ",")
		mt, b64 := strings.CutSuffix(mt, ";base64")
		if !ok || !b64 {
			return nil, fmt.Errorf("a data URL must be base64")
		}
		return map[string]any{"type": "base64", "media_type": mt, "data": data}, nil
	}
	if u == "" {
		return nil, fmt.Errorf("no URL")
	}
	return map[string]any{"type": "url", "url": u}, nil
}
