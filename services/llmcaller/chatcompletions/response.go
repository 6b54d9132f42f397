package chatcompletions

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	json "github.com/go-json-experiment/json/v1"
)

// Completion is the part of a Chat Completions reply the translation reads.
type Completion struct {
	ID      string   `json:"id"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
	// Error is set by servers that answer an error with HTTP 200.
	Error json.RawMessage `json:"error"`
}

// Choice is one choice; only the first is read (Aptix never asks for n>1).
type Choice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	FinishReason *string      `json:"finish_reason"`
}

type replyMessage struct {
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal"`
	ToolCalls []replyToolCall `json:"tool_calls"`
	// ReasoningContent is DeepSeek's, vLLM's and llama.cpp's name for the
	// reasoning text; Reasoning is OpenRouter's (and newer vLLM's).
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

type replyToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string, or (some servers) the object itself.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Usage is Chat Completions usage with the details servers send.
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's cached token count.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// The Responses body written for a reply: the fields the mapper, the
// caller's summary and the Open Responses schema's core need.
type response struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	CreatedAt         int64       `json:"created_at"`
	Status            string      `json:"status"`
	Error             any         `json:"error"`
	IncompleteDetails *incomplete `json:"incomplete_details"`
	Model             string      `json:"model"`
	Output            []any       `json:"output"`
	Usage             *usage      `json:"usage"`
	// UpstreamID is the chat completion's own id, kept for tracing.
	UpstreamID string `json:"chat_completion_id,omitempty"`
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

type messageItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type refusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type reasoningItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Summary []any  `json:"summary"`
	Content []any  `json:"content"`
}

type reasoningText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ids names a translated response and its items. Items are named from the
// response id, so a stream's events and its final response agree.
type ids struct{ suffix string }

func newIDs() ids {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return ids{suffix: hex.EncodeToString(b)}
}

func (i ids) response() string  { return "resp_" + i.suffix }
func (i ids) message() string   { return "msg_" + i.suffix }
func (i ids) reasoning() string { return "rs_" + i.suffix }
func (i ids) call(n int) string { return "fc_" + i.suffix + "_" + strconv.Itoa(n) }

// callID is a tool call's call_id: the server's id, kept so the client's
// function_call_output matches; one the server left out, or reused within
// the reply, is made unique so two calls are never confused.
func (i ids) callID(given string, n int, seen map[string]bool) string {
	id := given
	if id == "" {
		id = "call_" + i.suffix + "_" + strconv.Itoa(n)
	} else if seen[id] {
		id = given + "_" + strconv.Itoa(n)
	}
	seen[id] = true
	return id
}

// ErrorBody reports whether a 2xx body is an error object ({"error":…} with
// no choices), as some servers answer failures, and the HTTP status it
// stands for: the error's own numeric code or status when it is one (429,
// 503, …), else 502 (the backend gave no usable answer).
func ErrorBody(body []byte) (status int, isError bool) {
	var c struct {
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
		Object  string          `json:"object"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &c) != nil {
		return 0, false
	}
	var inner json.RawMessage
	switch {
	case isSet(c.Error) && !isSet(c.Choices):
		inner = c.Error
	case c.Object == "error": // vLLM's shape: the error fields at the top level
		inner = body
	default:
		return 0, false
	}
	var e struct {
		Code   json.RawMessage `json:"code"`
		Status json.RawMessage `json:"status"`
	}
	_ = json.Unmarshal(inner, &e)
	for _, raw := range []json.RawMessage{e.Code, e.Status} {
		if n, err := strconv.Atoi(string(bytes.Trim(raw, `"`))); err == nil && n >= 400 && n <= 599 {
			return n, true
		}
	}
	return 502, true
}

// Response translates a non-streaming Chat Completions reply into a
// Responses body: reasoning, then the assistant text (or refusal) as a
// message, then one function_call per tool call with the server's call id;
// finish_reason becomes status and incomplete_details, usage the
// Responses usage.
func Response(body []byte) ([]byte, error) {
	var c Completion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("chat completion is not valid JSON: %w", err)
	}
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("chat completion has no choices")
	}
	ch := c.Choices[0]
	acc := accumulated{reasoning: deref(ch.Message.ReasoningContent), text: deref(ch.Message.Content), hasText: ch.Message.Content != nil,
		refusal: deref(ch.Message.Refusal)}
	if acc.reasoning == "" {
		acc.reasoning = deref(ch.Message.Reasoning)
	}
	if ch.FinishReason != nil {
		acc.finish = *ch.FinishReason
	}
	for _, tc := range ch.Message.ToolCalls {
		args, err := argumentString(tc.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool call %q: %w", tc.Function.Name, err)
		}
		acc.calls = append(acc.calls, &accCall{id: tc.ID, name: tc.Function.Name, args: args})
	}
	acc.usage = c.Usage
	r := acc.response(newIDs(), c)
	return json.Marshal(r)
}

// accumulated is one choice's reply, whole or gathered from a stream.
type accumulated struct {
	reasoning, text, refusal string
	hasText                  bool
	calls                    []*accCall
	finish                   string
	usage                    *Usage
}

type accCall struct {
	id, callID, name, args string
}

// assignCallIDs fixes each call's call_id once (the stream announces it
// before the response is complete).
func (a *accumulated) assignCallIDs(i ids) {
	seen := map[string]bool{}
	for n, c := range a.calls {
		if c.callID == "" {
			c.callID = i.callID(c.id, n, seen)
		} else {
			seen[c.callID] = true
		}
	}
}

// status maps finish_reason: length and content_filter end incomplete,
// everything else (stop, tool_calls, none given) completed.
func (a *accumulated) status() (string, *incomplete) {
	switch a.finish {
	case "length":
		return "incomplete", &incomplete{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &incomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

func (a *accumulated) response(i ids, c Completion) response {
	a.assignCallIDs(i)
	status, inc := a.status()
	created := c.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	r := response{ID: i.response(), Object: "response", CreatedAt: created, Status: status, IncompleteDetails: inc,
		Model: c.Model, Output: []any{}, UpstreamID: c.ID}
	if a.reasoning != "" {
		r.Output = append(r.Output, reasoningItem{ID: i.reasoning(), Type: "reasoning", Summary: []any{},
			Content: []any{reasoningText{Type: "reasoning_text", Text: a.reasoning}}})
	}
	if m, ok := a.message(i, status); ok {
		r.Output = append(r.Output, m)
	}
	for n, call := range a.calls {
		r.Output = append(r.Output, functionCallItem{ID: i.call(n), Type: "function_call", Status: "completed",
			CallID: call.callID, Name: call.name, Arguments: call.args})
	}
	r.Usage = convertUsage(a.usage)
	return r
}

// message is the assistant message item, if the reply has text or a
// refusal (a reply of tool calls with empty or null content has none).
func (a *accumulated) message(i ids, status string) (messageItem, bool) {
	if a.text == "" && a.refusal == "" && (len(a.calls) > 0 || !a.hasText) {
		return messageItem{}, false
	}
	m := messageItem{ID: i.message(), Type: "message", Status: status, Role: "assistant", Content: []any{}}
	if a.text != "" || a.refusal == "" {
		m.Content = append(m.Content, outputText{Type: "output_text", Text: a.text, Annotations: []any{}, Logprobs: []any{}})
	}
	if a.refusal != "" {
		m.Content = append(m.Content, refusalPart{Type: "refusal", Refusal: a.refusal})
	}
	return m, true
}

func convertUsage(u *Usage) *usage {
	if u == nil {
		return nil
	}
	cached := u.PromptCacheHitTokens
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > 0 {
		cached = u.PromptTokensDetails.CachedTokens
	}
	reasoning := 0
	if u.CompletionTokensDetails != nil {
		reasoning = u.CompletionTokensDetails.ReasoningTokens
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &usage{InputTokens: u.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": cached},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: map[string]int{"reasoning_tokens": reasoning}, TotalTokens: total}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
