package chat

import (
	"encoding/json"
	"strings"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Completion is a chat.completion object.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is the one choice of a completion (n is always 1).
type Choice struct {
	Index        int             `json:"index"`
	Message      Message         `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// Message is the assistant's message: content and/or tool calls.
type Message struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one function call of the assistant.
type ToolCall struct {
	// Index is set on a streamed call's deltas only.
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function Function `json:"function"`
}

// Function is a call's function name and JSON arguments.
type Function struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Usage is Chat Completions' usage with its cached and reasoning details.
type Usage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails CompletionTokensDetails `json:"completion_tokens_details"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetails is usage.completion_tokens_details.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// ID is the chat.completion id of a response: the same Aptix id, so the
// console and the logs find the turn by either.
func ID(responseID string) string { return "chatcmpl-" + strings.TrimPrefix(responseID, "resp_") }

// answer is what a response's output says as one assistant message.
type answer struct {
	text, refusal string
	hasText       bool
	calls         []ToolCall
}

// answerOf reads a response's output: the text and refusal of its
// messages, and its function calls in order. Reasoning and server-side
// tool items have no Chat Completions form and are left out.
func answerOf(r responses.Response) answer {
	var a answer
	for _, it := range r.Items() { // the typed result's items, not decoded again
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					a.text += c.Text
					a.hasText = true
				case "refusal":
					a.refusal += c.Refusal
				}
			}
		case "function_call":
			a.calls = append(a.calls, ToolCall{ID: it.CallID, Type: "function", Function: Function{Name: it.Name, Arguments: it.Arguments}})
		}
	}
	return a
}

// FinishReason is the finish_reason of a response: length when it stopped
// at max_output_tokens, content_filter when a filter stopped it,
// tool_calls when it ends in function calls, else stop.
func FinishReason(r responses.Response) string {
	if r.Status == responses.StatusIncomplete {
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(r.IncompleteDetails, &d)
		switch d.Reason {
		case "max_output_tokens":
			return "length"
		case "content_filter":
			return "content_filter"
		}
	}
	if len(answerOf(r).calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// UsageOf is a response's usage in Chat Completions' terms (nil when it has none).
func UsageOf(r responses.Response) *Usage {
	u := r.Usage
	if u == nil {
		return nil
	}
	return &Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		PromptTokensDetails:     PromptTokensDetails{CachedTokens: u.InputTokensDetails.CachedTokens},
		CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}}
}

// FromResponse is the chat.completion of a completed (or incomplete)
// response. A failed one is an error instead (Failed).
func FromResponse(r responses.Response) Completion {
	a := answerOf(r)
	msg := Message{Role: "assistant", ToolCalls: a.calls}
	if a.hasText || len(a.calls) == 0 && a.refusal == "" {
		text := a.text
		msg.Content = &text
	}
	if a.refusal != "" {
		ref := a.refusal
		msg.Refusal = &ref
	}
	return Completion{ID: ID(r.ID), Object: "chat.completion", Created: r.CreatedAt, Model: r.Model,
		Choices: []Choice{{Index: 0, Message: msg, FinishReason: FinishReason(r), Logprobs: json.RawMessage("null")}},
		Usage:   UsageOf(r)}
}

// Failed is the error a response that did not complete answers with
// (failed or cancelled), or nil.
func Failed(r responses.Response) *responses.Error {
	switch r.Status {
	case responses.StatusFailed:
		code, msg := "server_error", "The response failed."
		if r.Error != nil {
			code, msg = r.Error.Code, r.Error.Message
		}
		e := responses.Internal(code, msg)
		if r.Error != nil && r.Error.Type != "" {
			e.Type = r.Error.Type
		}
		return e
	case responses.StatusCancelled:
		e := responses.BadRequest("", "cancelled", "The request was cancelled before it completed.")
		e.Status = 499
		return e
	}
	return nil
}
