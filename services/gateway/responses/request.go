package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
)

// known lists every top-level parameter of a create request the gateway
// accepts: OpenAI's Responses parameters, the HTTP API's own aliases (docs/http-api.md#creating-a-response)
// (system_prompt, max_tokens) and Aptix's extension object. Anything else is
// OpenAI's 400 unknown_parameter, so a typo never passes silently.
var known = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true,
	"temperature": true, "top_p": true, "max_output_tokens": true, "text": true, "reasoning": true,
	"parallel_tool_calls": true, "metadata": true, "user": true, "store": true, "include": true,
	"truncation": true, "previous_response_id": true, "conversation": true, "prompt_cache_key": true,
	"prompt_cache_retention": true, "stream": true, "stream_options": true, "background": true,
	"max_tool_calls": true, "service_tier": true, "top_logprobs": true, "safety_identifier": true,
	"prompt": true, "frequency_penalty": true, "presence_penalty": true,
	"prompt_cache_options": true, "context_management": true, "moderation": true, "access_programs": true,
	// aliases (docs/http-api.md#creating-a-response)
	"system_prompt": true, "max_tokens": true,
	// Aptix's extension (SDKs send it as an extra body field)
	"aptix": true,
}

// modelled are the parameters the translation reads itself; every other
// known parameter travels to the upstream body untouched (Passthrough).
var modelled = map[string]bool{
	"model": true, "input": true, "instructions": true, "system_prompt": true, "tools": true,
	"tool_choice": true, "max_output_tokens": true, "max_tokens": true, "previous_response_id": true,
	"conversation": true, "stream": true, "stream_options": true, "store": true, "background": true,
	"aptix": true,
}

// CreateRequest is a parsed and validated POST /v1/responses body.
type CreateRequest struct {
	Model        string
	Input        []json.RawMessage // normalized: every item an object with a "type"
	Instructions string            // instructions, or its alias system_prompt
	Tools        json.RawMessage   // the tools that go upstream, verbatim (nil when none)
	// ToolsEcho is the client's tools array as sent (file_search included),
	// which the response repeats.
	ToolsEcho json.RawMessage
	// echoTools are ToolsEcho's tools as the envelope reads them, or why
	// it would refuse them (echoToolsErr): parsed once by Parse, for the
	// echo (Echo reports the error, where the create path always has).
	echoTools    []tooldef.Tool
	echoToolsErr error
	// FileSearch is set when a file_search tool asks Aptix to retrieve.
	FileSearch *FileSearch
	// Include is the include parameter (e.g. file_search_call.results).
	Include []string
	// ToolChoice is the normalized tool_choice: "", auto, none, required, or a tool name.
	ToolChoice      string
	ToolChoiceRaw   json.RawMessage // as sent, for echoing on the response
	MaxOutputTokens int
	PreviousID      string
	Conversation    string
	Stream          bool
	Store           bool
	Background      bool
	Metadata        map[string]string
	Aptix           *Extension
	// Fields are the known parameters the turn does not model, verbatim.
	Fields map[string]json.RawMessage
	// CompactedInput is, for a compaction, the client's input items (the
	// summary instruction excluded).
	CompactedInput []json.RawMessage
	// Generate is the generate parameter (false: a warm-up, codex.go).
	Generate *bool
	// Ignored are the parameters accepted and dropped (codex.go).
	Ignored []string
}

// Extension is the `aptix` object: full AgentExecuteRequest control for a
// client of the OpenAI wire format.
type Extension struct {
	Mode                  string   `json:"mode,omitempty"`
	WorkspaceId           string   `json:"workspaceId,omitempty"`
	Repo                  string   `json:"repo,omitempty"`
	Language              string   `json:"language,omitempty"`
	RagScope              string   `json:"ragScope,omitempty"`
	Tags                  []string `json:"tags,omitempty"`
	ActiveFiles           []string `json:"activeFiles,omitempty"`
	ConversationContextId string   `json:"conversationContextId,omitempty"`
	Index                 string   `json:"index,omitempty"`
	Backend               string   `json:"backend,omitempty"`
}

// Parse reads a create request body. Errors are OpenAI's: malformed JSON
// names the position, an unknown parameter names the parameter, a value of
// the wrong type names it and the expected type.
func Parse(data []byte) (*CreateRequest, *Error) {
	var raw map[string]json.RawMessage
	if decodeRequest(data, &raw) != nil {
		// encoding/json's error is the one the message names a position of.
		raw = nil
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, jsonError(data, err)
		}
	}
	if raw == nil {
		return nil, invalid("", CodeInvalidJSON, "The request body must be a JSON object.")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names) // the first unknown parameter reported is stable
	for _, k := range names {
		if !known[k] && !dropped[k] && k != "generate" {
			return nil, invalid(k, CodeUnknownParameter, "Unknown parameter: '%s'.", k)
		}
	}
	r := &CreateRequest{Fields: map[string]json.RawMessage{}, Store: true}
	var e *Error
	field := func(name string, dst any, want string) {
		if e != nil {
			return
		}
		v, ok := raw[name]
		if !ok || isNull(v) {
			return
		}
		if err := decodeRequest(v, dst); err != nil {
			e = invalid(name, CodeInvalidType, "Invalid type for '%s': expected %s.", name, want)
		}
	}
	var systemPrompt string
	var maxTokens int
	var store *bool
	field("model", &r.Model, "a string")
	field("instructions", &r.Instructions, "a string")
	field("system_prompt", &systemPrompt, "a string")
	field("max_output_tokens", &r.MaxOutputTokens, "an integer")
	field("max_tokens", &maxTokens, "an integer")
	field("previous_response_id", &r.PreviousID, "a string")
	field("stream", &r.Stream, "a boolean")
	field("store", &store, "a boolean")
	field("background", &r.Background, "a boolean")
	field("metadata", &r.Metadata, "an object of strings")
	field("include", &r.Include, "an array of strings")
	if e != nil {
		return nil, e
	}
	if store != nil {
		r.Store = *store
	}
	if r.Instructions == "" {
		r.Instructions = systemPrompt // alias: system_prompt → instructions
	}
	if r.MaxOutputTokens == 0 {
		r.MaxOutputTokens = maxTokens // alias: max_tokens → max_output_tokens
	}
	if r.MaxOutputTokens < 0 {
		return nil, invalid("max_output_tokens", CodeInvalidValue, "Invalid 'max_output_tokens': integer below minimum value 1.")
	}
	if len(r.Metadata) > 16 {
		return nil, invalid("metadata", CodeInvalidValue, "Invalid 'metadata': too many properties (%d > 16).", len(r.Metadata))
	}
	if r.Background && !r.Store {
		// A background response is only ever read back: it must be kept.
		return nil, invalid("background", CodeInvalidValue, "Background mode requires 'store': true.")
	}
	if e := r.parseConversation(raw["conversation"]); e != nil {
		return nil, e
	}
	// Ids become subjects and keys: refused before anything is looked up.
	if e := CheckID("previous_response_id", r.PreviousID); e != nil {
		return nil, e
	}
	if e := CheckID("conversation", r.Conversation); e != nil {
		return nil, e
	}
	if r.PreviousID != "" && r.Conversation != "" {
		return nil, invalid("conversation", "mutually_exclusive", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
	}
	if e := r.parseInput(raw["input"]); e != nil {
		return nil, e
	}
	if e := r.parseTools(raw["tools"]); e != nil {
		return nil, e
	}
	if e := r.parseToolChoice(raw["tool_choice"]); e != nil {
		return nil, e
	}
	if v, ok := raw["aptix"]; ok && !isNull(v) {
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		r.Aptix = &Extension{}
		if err := dec.Decode(r.Aptix); err != nil {
			return nil, invalid("aptix", CodeInvalidValue, "Invalid 'aptix': %s.", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if e := r.parseClientOnly(raw); e != nil {
		return nil, e
	}
	for k, v := range raw {
		if !modelled[k] && !isNull(v) {
			r.Fields[k] = v
		}
	}
	// file_search is Aptix's own: its include entry is answered here, and an
	// upstream without the tool would reject it.
	if _, ok := r.Fields["include"]; ok {
		var rest []string
		for _, inc := range r.Include {
			if !strings.HasPrefix(inc, "file_search_call.") {
				rest = append(rest, inc)
			}
		}
		delete(r.Fields, "include")
		if len(rest) > 0 {
			r.Fields["include"], _ = json.Marshal(rest)
		}
	}
	return r, nil
}

// jsonError is OpenAI's 400 for a body that is not JSON, with the byte
// position (and line and column) where parsing stopped.
func jsonError(data []byte, err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included: the
		// position reported is that byte's (0-based), line and column 1-based.
		at := max(syn.Offset-1, 0)
		line, col := position(data, at)
		return invalid("", CodeInvalidJSON, "We could not parse the JSON body of your request: %s at position %d (line %d, column %d).", syn.Error(), at, line, col)
	case errors.As(err, &typ):
		return invalid("", CodeInvalidJSON, "The request body must be a JSON object, not %s.", typ.Value)
	}
	return invalid("", CodeInvalidJSON, "We could not parse the JSON body of your request: %v.", err)
}

func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// parseConversation accepts OpenAI's conversation parameter as a string or
// {"id":…}; it names the Aptix conversation to continue.
func (r *CreateRequest) parseConversation(v json.RawMessage) *Error {
	if isNull(v) {
		return nil
	}
	if json.Unmarshal(v, &r.Conversation) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(v, &obj) != nil || obj.ID == "" {
			return invalid("conversation", CodeInvalidType, "Invalid type for 'conversation': expected a string or an object with an id.")
		}
		r.Conversation = obj.ID
	}
	return nil
}

// parseInput normalizes input: a string is one user message; a list's
// items get "type":"message" when they are messages without a type (the
// SDKs' EasyInputMessage), as llama.cpp and the envelope expect.
func (r *CreateRequest) parseInput(v json.RawMessage) *Error {
	if isNull(v) {
		return invalid("input", CodeMissingParameter, "Missing required parameter: 'input'.")
	}
	var s string
	if decodeRequest(v, &s) == nil {
		// Fields in name order: the bytes a map would encode to.
		type part struct {
			Text string `json:"text"`
			Type string `json:"type"`
		}
		msg, _ := json.Marshal(struct {
			Content []part `json:"content"`
			Role    string `json:"role"`
			Type    string `json:"type"`
		}{[]part{{s, "input_text"}}, "user", "message"})
		r.Input = []json.RawMessage{msg}
		return nil
	}
	var items []json.RawMessage
	if decodeRequest(v, &items) != nil {
		return invalid("input", CodeInvalidType, "Invalid type for 'input': expected a string or an array of input items.")
	}
	if len(items) == 0 {
		return invalid("input", CodeInvalidValue, "Invalid 'input': empty array. Expected at least one input item.")
	}
	for i, it := range items {
		var m map[string]json.RawMessage
		if decodeRequest(it, &m) != nil || m == nil {
			return invalid(fmt.Sprintf("input[%d]", i), CodeInvalidType, "Invalid type for 'input[%d]': expected an object.", i)
		}
		var typ, role string
		_ = decodeRequest(m["type"], &typ)
		_ = decodeRequest(m["role"], &role)
		if typ == "" {
			if role == "" {
				return invalid(fmt.Sprintf("input[%d]", i), CodeMissingParameter, "Missing required parameter: 'input[%d].type'.", i)
			}
			m["type"] = json.RawMessage(`"message"`)
			it, _ = json.Marshal(m)
			typ = "message"
		}
		if typ == "message" {
			switch role {
			case "user", "system", "developer", "assistant":
			default:
				return invalid(fmt.Sprintf("input[%d].role", i), CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'user', 'system', 'developer' and 'assistant'.", role)
			}
			if isNull(m["content"]) {
				return invalid(fmt.Sprintf("input[%d].content", i), CodeMissingParameter, "Missing required parameter: 'input[%d].content'.", i)
			}
		}
		r.Input = append(r.Input, it)
	}
	return nil
}

func (r *CreateRequest) parseTools(v json.RawMessage) *Error {
	if isNull(v) {
		return nil
	}
	// One decode of the array; each tool's fields are read from its own
	// bytes (a tool that is not an object fails like the array would).
	var raws []json.RawMessage
	if decodeRequest(v, &raws) != nil {
		return invalid("tools", CodeInvalidType, "Invalid type for 'tools': expected an array of tool objects.")
	}
	tools := make([]map[string]json.RawMessage, len(raws))
	for i, raw := range raws {
		if decodeRequest(raw, &tools[i]) != nil {
			return invalid("tools", CodeInvalidType, "Invalid type for 'tools': expected an array of tool objects.")
		}
	}
	var upstream []json.RawMessage
	for i, t := range tools {
		var typ string
		if decodeRequest(t["type"], &typ) != nil || typ == "" {
			return invalid(fmt.Sprintf("tools[%d].type", i), CodeMissingParameter, "Missing required parameter: 'tools[%d].type'.", i)
		}
		if typ == "file_search" {
			// Aptix's retriever serves it; the upstream never sees it.
			fs, e := parseFileSearch(i, raws[i])
			if e != nil {
				return e
			}
			r.FileSearch = fs
			continue
		}
		upstream = append(upstream, raws[i])
		if typ != "function" {
			continue
		}
		var name string
		if fn, ok := t["function"]; ok { // Chat Completions shape
			var inner struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(fn, &inner)
			name = inner.Name
		} else {
			_ = json.Unmarshal(t["name"], &name)
		}
		if name == "" {
			return invalid(fmt.Sprintf("tools[%d].name", i), CodeMissingParameter, "Missing required parameter: 'tools[%d].name'.", i)
		}
	}
	if len(tools) > 0 {
		r.ToolsEcho = v
		r.echoTools, r.echoToolsErr = tooldef.ParseItems("tools", raws)
	}
	if len(upstream) > 0 {
		r.Tools, _ = json.Marshal(upstream)
	}
	return nil
}

// parseToolChoice accepts every tool_choice form: the strings auto, none and
// required; {"type":"function","name":…}; the Chat Completions
// form {"type":"function","function":{"name":…}}; the object forms
// {"type":"auto"|"none"|"required"}; {"type":"allowed_tools","mode":…};
// {"type":"custom","name":…}; and hosted tool types, which require a tool.
func (r *CreateRequest) parseToolChoice(v json.RawMessage) *Error {
	if isNull(v) {
		return nil
	}
	r.ToolChoiceRaw = v
	var s string
	if decodeRequest(v, &s) == nil {
		switch s {
		case "auto", "none", "required":
			r.ToolChoice = s
			return nil
		}
		return invalid("tool_choice", CodeInvalidValue, "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Mode     string `json:"mode"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if decodeRequest(v, &obj) != nil {
		return invalid("tool_choice", CodeInvalidType, "Invalid type for 'tool_choice': expected a string or an object.")
	}
	switch {
	case obj.Function != nil && obj.Function.Name != "":
		r.ToolChoice = obj.Function.Name
	case (obj.Type == "function" || obj.Type == "custom") && obj.Name != "":
		r.ToolChoice = obj.Name
	case obj.Type == "auto" || obj.Type == "none" || obj.Type == "required":
		r.ToolChoice = obj.Type
	case obj.Type == "allowed_tools":
		r.ToolChoice = obj.Mode
		if r.ToolChoice == "" {
			r.ToolChoice = "auto"
		}
	case obj.Type == "function" || obj.Type == "custom":
		return invalid("tool_choice.name", CodeMissingParameter, "Missing required parameter: 'tool_choice.name'.")
	case obj.Type == "file_search":
		r.ToolChoice = "" // Aptix retrieves for every turn with a file_search tool
	case obj.Type != "":
		r.ToolChoice = "required" // a hosted tool (web_search, mcp, …)
	default:
		return invalid("tool_choice.type", CodeMissingParameter, "Missing required parameter: 'tool_choice.type'.")
	}
	return nil
}
