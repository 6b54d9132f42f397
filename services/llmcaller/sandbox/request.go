package sandbox

import (
	"bytes"
	"fmt"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	json "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// request is the part of a /responses body the sandbox reads. Unknown fields
// are accepted, as OpenAI accepts most of them. Optional settings are
// pointers so the response can echo what was sent and default the rest.
type request struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              []tool          `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	MaxToolCalls       *int            `json:"max_tool_calls"`
	Stream             bool            `json:"stream"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	PresencePenalty    *float64        `json:"presence_penalty"`
	FrequencyPenalty   *float64        `json:"frequency_penalty"`
	TopLogprobs        *int            `json:"top_logprobs"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Store              *bool           `json:"store"`
	Background         bool            `json:"background"`
	Truncation         *string         `json:"truncation"`
	User               *string         `json:"user"`
	SafetyIdentifier   *string         `json:"safety_identifier"`
	PromptCacheKey     *string         `json:"prompt_cache_key"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               json.RawMessage `json:"text"`
	Reasoning          json.RawMessage `json:"reasoning"`
	ContextManagement  []contextEntry  `json:"context_management"`
}

// contextEntry is one entry of context_management: the sandbox knows the
// compaction entry, which compacts the context inline once it passes
// compact_threshold tokens (compact.go).
type contextEntry struct {
	Type             string `json:"type"`
	CompactThreshold *int   `json:"compact_threshold"`
}

// compactThreshold is the token count past which the context is compacted
// inline, 0 when the request asks for none.
func (r request) compactThreshold() int {
	for _, c := range r.ContextManagement {
		if c.Type == "compaction" && c.CompactThreshold != nil {
			return *c.CompactThreshold
		}
	}
	return 0
}

// item is the subset of an input item the sandbox reads.
type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Phase            string          `json:"phase"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent string          `json:"encrypted_content"`
	// body is Content decoded on first use (decodeEntry sets it), shared by
	// the item's copies so a request decodes each content once.
	body *content
}

// part is a content part; only the fields the sandbox reads.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
}

// texts returns the text parts of a message item; content may be a string.
// The slice is shared by every call: callers only read it.
func (it item) texts() []string { return it.decoded().texts }

// parts returns the content parts of a message item: none when the content
// is a string, absent, or not an array of parts.
func (it item) parts() []part { return it.decoded().parts }

// decoded is the item's content, decoded once per item made by decodeEntry
// and on every call for any other (a zero item has no content to decode).
func (it item) decoded() *content {
	if it.body == nil {
		return (&content{raw: it.Content}).get()
	}
	return it.body.get()
}

// parseRequest decodes and validates a body: input must be a string or an
// array of item objects, each decoded once into the entries returned.
func parseRequest(body []byte) (request, []entry, error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, invalid("", "", fmt.Sprintf("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.) Sandbox detail: %v", err))
	}
	in := bytes.TrimSpace(req.Input)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return req, nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	items, err := parseInput(in)
	if err != nil {
		return req, nil, err
	}
	for i, c := range req.ContextManagement {
		if c.Type != "compaction" {
			return req, nil, invalid(fmt.Sprintf("context_management[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'compaction'.", c.Type))
		}
		if c.CompactThreshold != nil && *c.CompactThreshold < 1 {
			return req, nil, invalid(fmt.Sprintf("context_management[%d].compact_threshold", i), "integer_below_min_value", "Invalid 'compact_threshold': integer below minimum value.")
		}
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		return req, nil, invalid("max_output_tokens", "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value.")
	}
	return req, items, nil
}

// parseInput turns input (a string or an array of items) into decoded items,
// and rejects malformed items the way OpenAI does (400 naming the item).
func parseInput(in []byte) ([]entry, error) {
	switch in[0] {
	case '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
		}
		msg, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []part{{Type: "input_text", Text: s}}})
		return []entry{decodeEntry(msg)}, nil
	case '[':
		items, err := splitInput(in)
		if err != nil {
			return nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
		}
		entries := make([]entry, len(items))
		for i, el := range items {
			e, err := validateItem(i, el)
			if err != nil {
				return nil, err
			}
			entries[i] = e
		}
		return entries, nil
	default:
		return nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
	}
}

// validateItem decodes an item and checks what the sandbox relies on: an
// object with a type (or a role), a known message role, an assistant-only
// phase, image parts that name their image, and compaction items the
// sandbox itself produced.
func validateItem(i int, el element) (entry, error) {
	param := fmt.Sprintf("input[%d]", i)
	if !el.object {
		return entry{}, invalid(param, "invalid_type", fmt.Sprintf("Invalid '%s': expected an object.", param))
	}
	if !el.typed {
		return entry{}, invalid(param, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.type'.", param))
	}
	e := decodeEntry(el.raw)
	if e.err != nil {
		return entry{}, invalid(param, "invalid_type", fmt.Sprintf("Invalid '%s': %v", param, e.err))
	}
	it := e.it
	switch it.Type {
	case "", "message":
		if err := validateMessage(param, it); err != nil {
			return entry{}, err
		}
	case "function_call_output":
		if it.CallID == "" {
			return entry{}, invalid(param+".call_id", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.call_id'.", param))
		}
	case "compaction":
		// Shape only: the server opens it (openCompactions), with its keys.
		if !sealbox.Sealed(compactPrefix, it.EncryptedContent) {
			return entry{}, invalid(param+".encrypted_content", "invalid_encrypted_content", fmt.Sprintf("Invalid '%s.encrypted_content': not a compaction produced by this server", param))
		}
	}
	return e, nil
}

func validateMessage(param string, it item) error {
	switch it.Role {
	case "user", "assistant", "system", "developer":
	default:
		return invalid(param+".role", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'user', 'assistant', 'system', and 'developer'.", it.Role))
	}
	if it.Phase != "" && (it.Role != "assistant" || (it.Phase != "commentary" && it.Phase != "final_answer")) {
		return invalid(param+".phase", "invalid_value", fmt.Sprintf("Invalid '%s.phase': '%s' (only assistant messages have a phase: 'commentary' or 'final_answer').", param, it.Phase))
	}
	// A string (or absent) content has no parts to check.
	for j, p := range it.parts() {
		if p.Type == "input_image" && p.ImageURL == "" && p.FileID == "" {
			return invalid(fmt.Sprintf("%s.content[%d]", param, j), "missing_required_parameter",
				fmt.Sprintf("Invalid '%s.content[%d]': an input_image needs 'image_url' or 'file_id'.", param, j))
		}
	}
	return nil
}

// choice is the resolved tool_choice: raw echoes it on the response, rule
// is what the answering rules read (reply.ToolCall).
type choice struct {
	raw  json.RawMessage
	rule reply.Choice
}

// none is tool_choice "none": no call is emitted, markers included.
func (c choice) none() bool { return c.rule.Mode == "none" }

// resolveChoice checks tool_choice against the request's own tools (tools
// are never inherited from previous_response_id).
func resolveChoice(req request) (choice, error) {
	c := choice{raw: req.ToolChoice, rule: reply.Choice{Mode: "auto"}}
	if len(c.raw) == 0 {
		c.raw = json.RawMessage(`"auto"`)
		return c, nil
	}
	var mode string
	if json.Unmarshal(c.raw, &mode) == nil {
		switch mode {
		case "auto", "none":
			c.rule.Mode = mode
			return c, nil
		case "required":
			c.rule.Mode = mode
			if len(functionTools(req.Tools)) > 0 {
				return c, nil
			}
			return c, invalid("tool_choice", "", "Tool choice 'required' must be specified with 'tools' parameter.")
		}
		return c, invalid("tool_choice", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", mode))
	}
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(c.raw, &obj); err != nil || obj.Type != "function" || obj.Name == "" {
		return c, invalid("tool_choice", "invalid_value", "Invalid 'tool_choice': expected 'auto', 'none', 'required' or {\"type\":\"function\",\"name\":…}.")
	}
	for _, t := range functionTools(req.Tools) {
		if t.Name == obj.Name {
			c.rule = reply.Choice{Mode: "function", Name: obj.Name}
			return c, nil
		}
	}
	return c, invalid("tool_choice", "", fmt.Sprintf("Tool choice '%s' not found in 'tools' parameter.", obj.Name))
}

// lastUserTexts returns the text parts of the last user message in items.
func lastUserTexts(items []entry) []string {
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i].it
		if items[i].err == nil && it.Role == "user" && (it.Type == "" || it.Type == "message") {
			return it.texts()
		}
	}
	return nil
}

// attachmentNote is the reply's sentence saying how many images and files
// the user message carried (none: no sentence), so tests can prove that
// input_image and input_file parts arrived.
func attachmentNote(user item) string {
	images, files := 0, 0
	for _, p := range user.parts() {
		switch p.Type {
		case "input_image":
			images++
		case "input_file":
			files++
		}
	}
	if images+files == 0 {
		return ""
	}
	return fmt.Sprintf(" Attachments: %d image(s), %d file(s).", images, files)
}
