package sandbox

import (
	"bytes"
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"strings"
)

// request is the part of a /responses body the sandbox reads. Unknown fields
// are accepted, as OpenAI accepts most of them.
type request struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              []tool          `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             bool            `json:"stream"`
}

type tool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// item is the subset of an input item the sandbox reads.
type item struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// texts returns the text parts of a message item; content may be a string.
func (it item) texts() []string {
	if len(it.Content) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return []string{s}
	}
	var parts []part
	if json.Unmarshal(it.Content, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return out
}

// parseRequest decodes and validates a body: input must be a string or an
// array of item objects.
func parseRequest(body []byte) (request, []json.RawMessage, error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, invalid("", "", fmt.Sprintf("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.) Sandbox detail: %v", err))
	}
	in := bytes.TrimSpace(req.Input)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return req, nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	var items []json.RawMessage
	switch in[0] {
	case '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return req, nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
		}
		msg, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []part{{Type: "input_text", Text: s}}})
		items = []json.RawMessage{msg}
	case '[':
		if err := json.Unmarshal(in, &items); err != nil {
			return req, nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
		}
		for i, raw := range items {
			var it map[string]json.RawMessage
			if json.Unmarshal(raw, &it) != nil {
				return req, nil, invalid(fmt.Sprintf("input[%d]", i), "invalid_type", fmt.Sprintf("Invalid 'input[%d]': expected an object.", i))
			}
			if _, ok := it["type"]; !ok {
				if _, ok := it["role"]; !ok {
					return req, nil, invalid(fmt.Sprintf("input[%d]", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'input[%d].type'.", i))
				}
			}
		}
	default:
		return req, nil, invalid("input", "invalid_type", "Invalid 'input': expected a string or an array of items.")
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		return req, nil, invalid("max_output_tokens", "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value.")
	}
	return req, items, nil
}

// choice is the resolved tool_choice: forced is the tool to call, if any.
type choice struct {
	raw    json.RawMessage
	forced *tool
}

// resolveChoice applies tool_choice to the request's own tools (tools are
// never inherited from previous_response_id).
func resolveChoice(req request) (choice, error) {
	c := choice{raw: req.ToolChoice}
	if len(c.raw) == 0 {
		c.raw = json.RawMessage(`"auto"`)
		return c, nil
	}
	var mode string
	if json.Unmarshal(c.raw, &mode) == nil {
		switch mode {
		case "auto", "none":
			return c, nil
		case "required":
			for i := range req.Tools {
				if req.Tools[i].Type == "function" {
					c.forced = &req.Tools[i]
					return c, nil
				}
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
	for i := range req.Tools {
		if req.Tools[i].Type == "function" && req.Tools[i].Name == obj.Name {
			c.forced = &req.Tools[i]
			return c, nil
		}
	}
	return c, invalid("tool_choice", "", fmt.Sprintf("Tool choice '%s' not found in 'tools' parameter.", obj.Name))
}

// lastUserTexts returns the text parts of the last user message in items.
func lastUserTexts(items []json.RawMessage) []string {
	for i := len(items) - 1; i >= 0; i-- {
		var it item
		if json.Unmarshal(items[i], &it) != nil {
			continue
		}
		if it.Role == "user" && (it.Type == "" || it.Type == "message") {
			return it.texts()
		}
	}
	return nil
}

// modeOf finds "[MODE: X]" in the texts.
func modeOf(texts []string) string {
	for _, t := range texts {
		if i := strings.Index(t, "[MODE:"); i >= 0 {
			rest := t[i+len("[MODE:"):]
			if j := strings.Index(rest, "]"); j >= 0 {
				return strings.TrimSpace(rest[:j])
			}
		}
	}
	return "unspecified"
}

// instructionOf returns the first line after "[INSTRUCTION]", or else the
// first non-empty line that is not a [MODE]/[CONTEXT] marker.
func instructionOf(texts []string) string {
	for _, t := range texts {
		if _, after, ok := strings.Cut(t, "[INSTRUCTION]"); ok {
			for _, line := range strings.Split(after, "\n") {
				if l := strings.TrimSpace(line); l != "" {
					return l
				}
			}
		}
	}
	for _, t := range texts {
		if strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			continue
		}
		for _, line := range strings.Split(t, "\n") {
			l := strings.TrimSpace(line)
			if l != "" && !strings.HasPrefix(l, "[MODE:") {
				return l
			}
		}
	}
	return "(empty)"
}

// chunkIDs parses the AGN-002 "Id: <id>" line that follows each
// "=== CHUNK N ===" header of a [CONTEXT] part, so an "Id:" inside a chunk's
// code is never mistaken for one.
func chunkIDs(texts []string) []string {
	var ids []string
	for _, t := range texts {
		if !strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			continue
		}
		lines := strings.Split(t, "\n")
		for i := 0; i+1 < len(lines); i++ {
			l := strings.TrimSpace(lines[i])
			if strings.HasPrefix(l, "=== CHUNK ") && strings.HasSuffix(l, " ===") {
				if id, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "Id: "); ok {
					ids = append(ids, strings.TrimSpace(id))
				}
			}
		}
	}
	return ids
}
