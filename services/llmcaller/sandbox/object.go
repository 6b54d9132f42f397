package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	json "github.com/go-json-experiment/json/v1"
	"time"
)

// response is the Responses API response object with every field the Open
// Responses schema marks required (ResponseResource), in OpenAI's order, plus
// a "sandbox": true marker. Clients such as the conformance suite validate it
// against that schema, so a field is never left out, only set to null.
// Output items are kept as values of the concrete item types so the SSE
// writer can replay them part by part.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *apiError         `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       json.RawMessage   `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	MaxToolCalls       *int              `json:"max_tool_calls"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	ServiceTier        string            `json:"service_tier"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopLogprobs        int               `json:"top_logprobs"`
	TopP               float64           `json:"top_p"`
	PresencePenalty    float64           `json:"presence_penalty"`
	FrequencyPenalty   float64           `json:"frequency_penalty"`
	Truncation         string            `json:"truncation"`
	Usage              *usage            `json:"usage"`
	User               *string           `json:"user"`
	Metadata           json.RawMessage   `json:"metadata"`
	Sandbox            bool              `json:"sandbox"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type usage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

func newUsage(in, out int) *usage {
	return &usage{InputTokens: in, InputTokensDetails: map[string]int{"cached_tokens": 0},
		OutputTokens: out, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: in + out}
}

type messageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is an output_text part; annotations and logprobs are always
// arrays (never null), as the Open Responses schema requires.
type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func newID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// tokens estimates a token count as ~4 bytes per token, at least 1.
func tokens(s string) int { return tokenCount(len(s)) }

// tokenCount is tokens of n bytes, so a sum of lengths needs no string.
func tokenCount(n int) int { return max(1, (n+3)/4) }

// newResponse fills every field from the request, with OpenAI's defaults
// where the request said nothing: what a client sent is echoed back, so a
// client can see which settings the (pretend) model ran with.
func newResponse(req request, ch choice) response {
	resp := response{
		ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "completed",
		Instructions: orNull(req.Instructions), MaxOutputTokens: req.MaxOutputTokens, MaxToolCalls: req.MaxToolCalls,
		Model: req.Model, ParallelToolCalls: deref(req.ParallelToolCalls, true),
		PromptCacheKey: req.PromptCacheKey, Reasoning: withDefaults(req.Reasoning, `{"effort":null,"summary":null}`),
		SafetyIdentifier: req.SafetyIdentifier, ServiceTier: "default", Store: deref(req.Store, true),
		Temperature: deref(req.Temperature, 1), Text: withDefaults(req.Text, `{"format":{"type":"text"},"verbosity":"medium"}`),
		ToolChoice: ch.raw, Tools: echoTools(req.Tools), TopLogprobs: deref(req.TopLogprobs, 0), TopP: deref(req.TopP, 1),
		PresencePenalty: deref(req.PresencePenalty, 0), FrequencyPenalty: deref(req.FrequencyPenalty, 0),
		Truncation: deref(req.Truncation, "disabled"), User: req.User, Metadata: withDefaults(req.Metadata, `{}`), Sandbox: true,
	}
	if resp.Model == "" {
		resp.Model = "sandbox"
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	return resp
}

// finishAt marks a terminal response with its completion time.
func (r *response) finishAt(t time.Time) {
	u := t.Unix()
	r.CompletedAt = &u
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// withDefaults merges the request's object (if any) over def, so a partial
// object such as {"verbosity":"low"} still carries the required keys.
func withDefaults(raw json.RawMessage, def string) json.RawMessage {
	var base map[string]json.RawMessage
	_ = json.Unmarshal([]byte(def), &base)
	var given map[string]json.RawMessage
	if len(raw) > 0 && json.Unmarshal(raw, &given) == nil {
		for k, v := range given {
			base[k] = v
		}
	}
	b, err := json.Marshal(base)
	if err != nil {
		return json.RawMessage(def)
	}
	return b
}
