package anthropicmessages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Message is a Messages answer (or the one a stream builds up).
type Message struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        Usage             `json:"usage"`
}

// Usage is Messages usage: input_tokens excludes the cached reads and the
// cache writes, which Responses counts inside input_tokens.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// block is the part of a content block the translation reads.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// Response output items, fields in OpenAI's order.
type (
	messageItem struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []any  `json:"content"`
		// StopSequence is on the last message item of an answer that
		// stopped at one of stop_sequences (no Responses field says it):
		// the Messages door reads it back as stop_reason stop_sequence.
		StopSequence *string `json:"stop_sequence,omitempty"`
	}
	outputText struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
	}
	callItem struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	reasoningItem struct {
		ID               string `json:"id"`
		Type             string `json:"type"`
		Summary          []any  `json:"summary"`
		Content          []any  `json:"content"`
		EncryptedContent string `json:"encrypted_content"`
		Redacted         bool   `json:"redacted,omitempty"`
	}
	reasoningText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

// responseBody is the Responses body the caller reads.
type responseBody struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
	Usage             *responsesUsage `json:"usage"`
	Error             any             `json:"error"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		// CacheWriteTokens are Anthropic's cache_creation_input_tokens
		// (no OpenAI field; pkg/contracts prices them at cacheWrite).
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// itemID is the id of the output item of content block i: stable, so a
// stream's live items and its final body agree.
func itemID(prefix, msgID string, i int) string {
	return fmt.Sprintf("%s_%s_%d", prefix, strings.TrimPrefix(msgID, "msg_"), i)
}

// Response says a Messages answer as a Responses body: each text block a
// message item, each tool_use a function_call (its input as the
// arguments), each thinking block a reasoning item with its signature as
// encrypted_content; stop_reason max_tokens makes it incomplete
// (max_output_tokens), refusal incomplete (content_filter); usage counts
// the cache reads and writes inside input_tokens, reads as cached_tokens.
func Response(body []byte) ([]byte, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("read the Messages answer: %w", err)
	}
	if m.Type != "message" {
		return nil, fmt.Errorf("the answer is a %q, not a message", m.Type)
	}
	return marshal(m.responses("completed"))
}

func (m *Message) responses(status string) responseBody {
	r := responseBody{ID: "resp_" + strings.TrimPrefix(m.ID, "msg_"), Object: "response", CreatedAt: time.Now().Unix(),
		Status: status, Model: m.Model, Output: []any{}, IncompleteDetails: json.RawMessage("null")}
	for i, raw := range m.Content {
		var b block
		if json.Unmarshal(raw, &b) != nil {
			continue
		}
		switch b.Type {
		case "text":
			r.Output = append(r.Output, messageItem{ID: itemID("msg", m.ID, i), Type: "message", Status: "completed", Role: "assistant",
				Content: []any{outputText{Type: "output_text", Text: b.Text, Annotations: []any{}, Logprobs: []any{}}}})
		case "tool_use":
			args := "{}"
			if isSet(b.Input) {
				args = string(compact(b.Input))
			}
			r.Output = append(r.Output, callItem{ID: itemID("fc", m.ID, i), Type: "function_call", Status: "completed", CallID: b.ID, Name: b.Name, Arguments: args})
		case "thinking":
			r.Output = append(r.Output, reasoningItem{ID: itemID("rs", m.ID, i), Type: "reasoning", Summary: []any{},
				Content: []any{reasoningText{Type: "reasoning_text", Text: b.Thinking}}, EncryptedContent: b.Signature})
		case "redacted_thinking":
			r.Output = append(r.Output, reasoningItem{ID: itemID("rs", m.ID, i), Type: "reasoning", Summary: []any{}, Content: []any{},
				EncryptedContent: b.Data, Redacted: true})
		}
	}
	if m.StopReason != nil && *m.StopReason == "stop_sequence" && m.StopSequence != nil {
		for i := len(r.Output) - 1; i >= 0; i-- {
			if it, ok := r.Output[i].(messageItem); ok {
				it.StopSequence = m.StopSequence
				r.Output[i] = it
				break
			}
		}
	}
	if m.StopReason != nil && status == "completed" {
		switch *m.StopReason {
		case "max_tokens":
			r.Status, r.IncompleteDetails = "incomplete", json.RawMessage(`{"reason":"max_output_tokens"}`)
		case "refusal":
			r.Status, r.IncompleteDetails = "incomplete", json.RawMessage(`{"reason":"content_filter"}`)
		}
	}
	u := m.Usage
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	r.Usage = &responsesUsage{InputTokens: in, OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens}
	r.Usage.InputTokensDetails.CachedTokens = u.CacheReadInputTokens
	r.Usage.InputTokensDetails.CacheWriteTokens = u.CacheCreationInputTokens
	return r
}

// compact is a tool input as arguments: its JSON without insignificant space.
func compact(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}
