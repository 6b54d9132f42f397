package responses

import "encoding/json"

// anthropicDropped are the Responses parameters the anthropic-messages
// backend's translation (services/llmcaller/anthropicmessages) has no
// Messages equivalent for.
var anthropicDropped = []string{"include", "context_management", "max_tool_calls", "prompt_cache_key", "prompt_cache_retention",
	"service_tier", "safety_identifier", "top_logprobs", "frequency_penalty", "presence_penalty"}

// AnthropicDropped names what of r an anthropic-messages backend does not
// get, for X-Aptix-Ignored-Params: the parameters above, text.format
// other than plain text, text.verbosity, reasoning.summary, and
// truncation "auto" without the profile's contextWindow.
func (r *CreateRequest) AnthropicDropped(contextWindow int) []string {
	var out []string
	for _, k := range anthropicDropped {
		if v, ok := r.Fields[k]; ok && !isNull(v) {
			out = append(out, k)
		}
	}
	var text struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if v, ok := r.Fields["text"]; ok && json.Unmarshal(v, &text) == nil {
		if text.Format != nil && text.Format.Type != "text" {
			out = append(out, "text.format")
		}
		if !isNull(text.Verbosity) {
			out = append(out, "text.verbosity")
		}
	}
	var reasoning struct {
		Summary json.RawMessage `json:"summary"`
	}
	if v, ok := r.Fields["reasoning"]; ok && json.Unmarshal(v, &reasoning) == nil && !isNull(reasoning.Summary) {
		out = append(out, "reasoning.summary")
	}
	var truncation string
	if v, ok := r.Fields["truncation"]; ok && json.Unmarshal(v, &truncation) == nil && truncation == "auto" && contextWindow <= 0 {
		out = append(out, "truncation")
	}
	return out
}
