package responses

import (
	"encoding/json"
	"net/http"
)

// InputTokens is the answer of POST /v1/responses/input_tokens.
type InputTokens struct {
	Object      string `json:"object"`
	InputTokens int    `json:"input_tokens"`
}

// NewInputTokens is OpenAI's response.input_tokens object.
func NewInputTokens(n int) InputTokens {
	return InputTokens{Object: "response.input_tokens", InputTokens: n}
}

// countOnly are the input_tokens parameters a create does not take: read
// and ignored (personality shapes a model's tone, not the count).
var countOnly = []string{"personality"}

// ParseCount reads a POST /v1/responses/input_tokens body: a create body
// whose input may be absent (a count of the instructions, the history of
// previous_response_id or the tools alone). Errors are Parse's.
func ParseCount(data []byte) (*CreateRequest, *Error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, jsonError(data, err)
	}
	if raw == nil {
		return nil, invalid("", CodeInvalidJSON, "The request body must be a JSON object.")
	}
	var ignored []string
	for _, k := range countOnly {
		if _, ok := raw[k]; ok {
			ignored = append(ignored, k)
			delete(raw, k)
		}
	}
	noInput := isNull(raw["input"]) || string(raw["input"]) == "[]"
	if noInput {
		raw["input"] = json.RawMessage(`"-"`)
	}
	body, err := json.Marshal(raw)
	if err != nil {
		return nil, Internal("encode_count", err.Error())
	}
	r, e := Parse(body)
	if e != nil {
		return nil, e
	}
	if noInput {
		r.Input = nil
	}
	r.Ignored = append(r.Ignored, ignored...)
	return r, nil
}

// CountPreviousNotFound is the input_tokens endpoint's answer for a
// previous_response_id that does not exist or is another caller's: 404.
func CountPreviousNotFound(id string) *Error {
	e := PreviousNotFound(id)
	e.Status = http.StatusNotFound
	return e
}
