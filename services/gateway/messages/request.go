// Package messages is the gateway's Anthropic Messages codec
// (docs/http-api.md#messages): it parses a POST /v1/messages body and says
// it as the Responses create request the gateway already runs, so a
// Messages request is the same durable turn as every other front door
// (budgets, usage, cost, console, replay, events); and it encodes that
// turn's response as a Messages answer, its events as Anthropic's event
// stream, and errors in Anthropic's shape. It imports no HTTP or NATS
// package: every rule is table-tested as plain Go.
//
// Requests are transparent: an Anthropic backend gets the client's body
// as sent (Request.Body), so the translation is what every other backend
// gets, and what it cannot carry is named (Request.Unsent, AnthropicOnly)
// for X-Aptix-Ignored-Params, never silently dropped.
package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Request is a parsed Messages request.
type Request struct {
	Model  string
	Stream bool
	// Thinking says the request enabled extended thinking: a stream then
	// sends its blocks in the model's order once the answer is whole (the
	// turn's live deltas carry text and tool input, not thinking).
	Thinking bool
	// Body is the client's body as sent: an Anthropic backend gets it in
	// place of the translation (contracts.OpenAIPassthrough.Messages).
	Body json.RawMessage
	// Create is the Responses create body the request means.
	Create json.RawMessage
	// AnthropicOnly names the parameters Responses has no equivalent of
	// (top_k, stop_sequences, …) that the request set.
	AnthropicOnly []string
	// Unsent names the parts of the request below the top level that the
	// translation cannot carry (cache_control, thinking blocks, …).
	Unsent []string
}

// Ignored is what a backend other than Anthropic does not get, sorted.
func (r *Request) Ignored() []string {
	out := slices.Concat(r.AnthropicOnly, r.Unsent)
	slices.Sort(out)
	return slices.Compact(out)
}

// Options are what the parse needs to know of the backend.
type Options struct {
	// Anthropic: the backend speaks Messages, so thinking blocks go into
	// the translation as reasoning items with their signatures (another
	// backend would refuse a signature it did not make: they are named
	// instead).
	Anthropic bool
}

var (
	// known are the top-level members Anthropic accepts.
	known = map[string]bool{
		"model": true, "messages": true, "system": true, "max_tokens": true, "stream": true,
		"tools": true, "tool_choice": true, "temperature": true, "top_p": true, "top_k": true,
		"stop_sequences": true, "metadata": true, "thinking": true, "service_tier": true,
		"container": true, "mcp_servers": true, "context_management": true,
	}
	// anthropicOnly have no Responses equivalent.
	anthropicOnly = map[string]bool{"top_k": true, "stop_sequences": true, "service_tier": true,
		"container": true, "mcp_servers": true, "context_management": true}
)

// bad is a 400 invalid_request_error in the gateway's error type; the
// handler writes it in Anthropic's shape (ErrorBody).
func bad(param, format string, args ...any) *responses.Error {
	return responses.BadRequest(param, responses.CodeInvalidValue, fmt.Sprintf(format, args...))
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// Peek reads the model of a body (to route it before Parse, which needs
// to know whether the backend speaks Messages).
func Peek(data []byte) (model string) {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(data, &m)
	return m.Model
}

// Parse reads a Messages body. Errors are Anthropic's: malformed JSON, an
// unknown member ("Extra inputs are not permitted"), a missing model,
// max_tokens or messages, a value of the wrong type, each naming its field.
func Parse(data []byte, o Options) (*Request, *responses.Error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, bad("", "The request body is not valid JSON: %v", err)
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names)
	r := &Request{Body: data}
	for _, k := range names {
		if !known[k] {
			return nil, bad(k, "%s: Extra inputs are not permitted", k)
		}
		if anthropicOnly[k] && !isNull(raw[k]) {
			r.AnthropicOnly = append(r.AnthropicOnly, k)
		}
	}
	var e *responses.Error
	field := func(name string, dst any, want string) bool {
		v, ok := raw[name]
		if e != nil || !ok || isNull(v) {
			return false
		}
		if json.Unmarshal(v, dst) != nil {
			e = bad(name, "%s: Input should be %s", name, want)
			return false
		}
		return true
	}
	var maxTokens int
	var metadata struct {
		UserID *string `json:"user_id"`
	}
	var thinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}
	field("model", &r.Model, "a valid string")
	field("stream", &r.Stream, "a valid boolean")
	hasMax := field("max_tokens", &maxTokens, "a valid integer")
	field("metadata", &metadata, "a valid dictionary")
	hasThinking := field("thinking", &thinking, "a valid dictionary")
	if e != nil {
		return nil, e
	}
	switch {
	case r.Model == "":
		return nil, bad("model", "model: Field required")
	case !hasMax:
		return nil, bad("max_tokens", "max_tokens: Field required")
	case maxTokens < 1:
		return nil, bad("max_tokens", "max_tokens: Input should be greater than or equal to 1")
	}
	create := map[string]any{"store": false, "model": r.Model, "max_output_tokens": maxTokens}
	if r.Stream {
		create["stream"] = true
	}
	for _, k := range []string{"temperature", "top_p"} {
		if v := raw[k]; !isNull(v) {
			create[k] = v
		}
	}
	if metadata.UserID != nil {
		create["user"] = *metadata.UserID
	}
	if hasThinking && thinking.Type == "enabled" {
		r.Thinking = true
		create["reasoning"] = map[string]string{"effort": effort(thinking.BudgetTokens)}
	}
	if v := raw["tools"]; !isNull(v) {
		tools, unsent, e := convertTools(v)
		if e != nil {
			return nil, e
		}
		create["tools"] = tools
		r.Unsent = append(r.Unsent, unsent...)
	}
	if v := raw["tool_choice"]; !isNull(v) {
		tc, parallel, e := convertToolChoice(v)
		if e != nil {
			return nil, e
		}
		create["tool_choice"] = tc
		if parallel != nil {
			create["parallel_tool_calls"] = *parallel
		}
	}
	c := converter{anthropic: o.Anthropic}
	if v := raw["system"]; !isNull(v) {
		if e := c.system(v); e != nil {
			return nil, e
		}
	}
	if e := c.messages(raw["messages"]); e != nil {
		return nil, e
	}
	create["input"] = c.items
	r.Unsent = append(r.Unsent, c.unsent...)
	slices.Sort(r.Unsent)
	r.Unsent = slices.Compact(r.Unsent)
	b, err := json.Marshal(create)
	if err != nil {
		return nil, responses.Internal("encode_request", err.Error())
	}
	r.Create = b
	return r, nil
}

// effort is the reasoning effort a thinking budget asks for, as the
// anthropic-messages backend maps it back (services/llmcaller/anthropicmessages).
func effort(budget int) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// flatTool is a Responses function tool.
type flatTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict"`
}

// convertTools says custom tools (input_schema) as function tools, not
// strict (Anthropic does not hold a tool call to its schema); an
// Anthropic server tool (web search, bash, …) has no function twin: 400.
func convertTools(v json.RawMessage) ([]flatTool, []string, *responses.Error) {
	var tools []struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  *string         `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if json.Unmarshal(v, &tools) != nil {
		return nil, nil, bad("tools", "tools: Input should be a valid list of tools")
	}
	var unsent []string
	out := make([]flatTool, 0, len(tools))
	for i, t := range tools {
		p := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, bad(p+".type", "%s.type: the Anthropic server tool %q has no equivalent on this backend; only custom tools (input_schema) cross to it", p, t.Type)
		}
		if t.Name == "" {
			return nil, nil, bad(p+".name", "%s.name: Field required", p)
		}
		if isNull(t.InputSchema) {
			return nil, nil, bad(p+".input_schema", "%s.input_schema: Field required", p)
		}
		if !isNull(t.CacheControl) {
			unsent = append(unsent, "tools[].cache_control")
		}
		out = append(out, flatTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return out, unsent, nil
}

// convertToolChoice: auto, any (required), tool (a named function), none;
// disable_parallel_tool_use is parallel_tool_calls false.
func convertToolChoice(v json.RawMessage) (any, *bool, *responses.Error) {
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if json.Unmarshal(v, &tc) != nil {
		return nil, nil, bad("tool_choice", "tool_choice: Input should be a valid dictionary")
	}
	var parallel *bool
	if tc.DisableParallelToolUse != nil {
		p := !*tc.DisableParallelToolUse
		parallel = &p
	}
	switch tc.Type {
	case "auto":
		return "auto", parallel, nil
	case "any":
		return "required", parallel, nil
	case "none":
		return "none", parallel, nil
	case "tool":
		if tc.Name == "" {
			return nil, nil, bad("tool_choice.name", "tool_choice.name: Field required")
		}
		return map[string]string{"type": "function", "name": tc.Name}, parallel, nil
	}
	return nil, nil, bad("tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
}

// block is a content block as the translation reads it.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Source       *source         `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	Title        string          `json:"title"`
	CacheControl json.RawMessage `json:"cache_control"`
	Citations    json.RawMessage `json:"citations"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
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
		Output any    `json:"output"`
	}
	// reasoningItem carries a thinking block to an Anthropic backend: the
	// text as reasoning_text, the signature as encrypted_content (the
	// backend's translation turns it back into the block).
	reasoningItem struct {
		Type             string           `json:"type"`
		Summary          []any            `json:"summary"`
		Content          []map[string]any `json:"content"`
		EncryptedContent string           `json:"encrypted_content"`
		Redacted         bool             `json:"redacted,omitempty"`
	}
)

// converter gathers the input items of system and messages, in order.
type converter struct {
	anthropic bool
	items     []any
	unsent    []string
}

func (c *converter) note(name string) { c.unsent = append(c.unsent, name) }

// system is the system prompt as a system message first in the input (as
// the chat door does: never instructions, so the model sees it where the
// client put it).
func (c *converter) system(v json.RawMessage) *responses.Error {
	var s string
	if json.Unmarshal(v, &s) == nil {
		c.items = append(c.items, inputMessage{"message", "system", s})
		return nil
	}
	var blocks []block
	if json.Unmarshal(v, &blocks) != nil {
		return bad("system", "system: Input should be a valid string or a list of text blocks")
	}
	var parts []map[string]any
	for i, b := range blocks {
		if b.Type != "text" {
			return bad(fmt.Sprintf("system.%d.type", i), "system.%d.type: Input should be 'text'", i)
		}
		if !isNull(b.CacheControl) {
			c.note("system[].cache_control")
		}
		parts = append(parts, map[string]any{"type": "input_text", "text": b.Text})
	}
	if len(parts) > 0 {
		c.items = append(c.items, inputMessage{"message", "system", parts})
	}
	return nil
}

func (c *converter) messages(v json.RawMessage) *responses.Error {
	if isNull(v) {
		return bad("messages", "messages: Field required")
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(v, &msgs) != nil {
		return bad("messages", "messages: Input should be a valid list of messages")
	}
	if len(msgs) == 0 {
		return bad("messages", "messages: at least one message is required")
	}
	for i, m := range msgs {
		p := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return bad(p+".role", "%s.role: Input should be 'user' or 'assistant'", p)
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if m.Role == "user" {
				c.items = append(c.items, inputMessage{"message", "user", s})
			} else {
				c.items = append(c.items, inputMessage{"message", "assistant", []map[string]any{outputText(s)}})
			}
			continue
		}
		var blocks []block
		if json.Unmarshal(m.Content, &blocks) != nil {
			return bad(p+".content", "%s.content: Input should be a valid string or a list of content blocks", p)
		}
		if e := c.blocks(p, m.Role, blocks); e != nil {
			return e
		}
	}
	return nil
}

func outputText(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}}
}

// blocks says one message's blocks as items, in their order: its text,
// images and documents gather into a message of its role until a
// tool_use (a function_call), a tool_result (a function_call_output) or a
// thinking block (a reasoning item) comes between.
func (c *converter) blocks(p, role string, blocks []block) *responses.Error {
	var parts []map[string]any
	flush := func() {
		if len(parts) > 0 {
			c.items = append(c.items, inputMessage{"message", role, parts})
			parts = nil
		}
	}
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content.%d", p, j)
		if !isNull(b.CacheControl) {
			c.note("messages[].content[].cache_control")
		}
		switch b.Type {
		case "text":
			if role == "assistant" {
				parts = append(parts, outputText(b.Text))
			} else {
				parts = append(parts, map[string]any{"type": "input_text", "text": b.Text})
			}
			if !isNull(b.Citations) {
				c.note("messages[].content[].citations")
			}
		case "image", "document":
			if role != "user" {
				return bad(bp+".type", "%s.type: %s blocks are allowed in user messages only", bp, b.Type)
			}
			part, e := media(bp, b)
			if e != nil {
				return e
			}
			parts = append(parts, part)
		case "tool_use":
			if role != "assistant" {
				return bad(bp+".type", "%s.type: tool_use blocks are allowed in assistant messages only", bp)
			}
			if b.ID == "" || b.Name == "" {
				return bad(bp, "%s: tool_use needs an id and a name", bp)
			}
			args := "{}"
			if !isNull(b.Input) {
				var out bytes.Buffer
				if json.Compact(&out, b.Input) == nil {
					args = out.String()
				}
			}
			flush()
			c.items = append(c.items, functionCall{"function_call", b.ID, b.Name, args})
		case "tool_result":
			if role != "user" {
				return bad(bp+".type", "%s.type: tool_result blocks are allowed in user messages only", bp)
			}
			if b.ToolUseID == "" {
				return bad(bp+".tool_use_id", "%s.tool_use_id: Field required", bp)
			}
			out, e := c.toolOutput(bp, b.Content)
			if e != nil {
				return e
			}
			if b.IsError {
				c.note("messages[].content[].is_error")
			}
			flush()
			c.items = append(c.items, functionOutput{"function_call_output", b.ToolUseID, out})
		case "thinking", "redacted_thinking":
			if role != "assistant" {
				return bad(bp+".type", "%s.type: %s blocks are allowed in assistant messages only", bp, b.Type)
			}
			if !c.anthropic {
				c.note("messages[].content[]." + b.Type)
				continue
			}
			flush()
			if b.Type == "thinking" {
				c.items = append(c.items, reasoningItem{Type: "reasoning", Summary: []any{},
					Content: []map[string]any{{"type": "reasoning_text", "text": b.Thinking}}, EncryptedContent: b.Signature})
			} else {
				c.items = append(c.items, reasoningItem{Type: "reasoning", Summary: []any{}, Content: []map[string]any{}, EncryptedContent: b.Data, Redacted: true})
			}
		default:
			return bad(bp+".type", "%s.type: content block type %q is not served", bp, b.Type)
		}
	}
	flush()
	return nil
}

// toolOutput is a tool_result's content: a string as it is; blocks as
// Responses output parts (text, images).
func (c *converter) toolOutput(p string, content json.RawMessage) (any, *responses.Error) {
	if isNull(content) {
		return "", nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s, nil
	}
	var blocks []block
	if json.Unmarshal(content, &blocks) != nil {
		return nil, bad(p+".content", "%s.content: Input should be a valid string or a list of blocks", p)
	}
	var texts []string
	var parts []map[string]any
	for k, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
			parts = append(parts, map[string]any{"type": "input_text", "text": b.Text})
		case "image", "document":
			part, e := media(fmt.Sprintf("%s.content.%d", p, k), b)
			if e != nil {
				return nil, e
			}
			parts = append(parts, part)
		default:
			return nil, bad(fmt.Sprintf("%s.content.%d.type", p, k), "%s.content.%d.type: %q is not served in a tool_result", p, k, b.Type)
		}
	}
	if len(parts) == len(texts) {
		return strings.Join(texts, "\n"), nil // all text: one string, as most tools answer
	}
	return parts, nil
}

// media is an image or document block as an input_image or input_file.
func media(p string, b block) (map[string]any, *responses.Error) {
	if b.Source == nil {
		return nil, bad(p+".source", "%s.source: Field required", p)
	}
	s := b.Source
	var url string
	switch s.Type {
	case "base64":
		url = "data:" + s.MediaType + ";base64," + s.Data
	case "url":
		url = s.URL
	case "text":
		if b.Type == "document" {
			return map[string]any{"type": "input_text", "text": s.Data}, nil
		}
		fallthrough
	default:
		return nil, bad(p+".source.type", "%s.source.type: %q is not served", p, s.Type)
	}
	if b.Type == "image" {
		return map[string]any{"type": "input_image", "image_url": url, "detail": "auto"}, nil
	}
	f := map[string]any{"type": "input_file", "filename": cmpOr(b.Title, "document.pdf")}
	if s.Type == "url" {
		f["file_url"] = url
	} else {
		f["file_data"] = url
	}
	return f, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
