package messages

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Message is a Messages answer.
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// Usage is Anthropic's usage: input_tokens are the tokens neither read
// from nor written to the cache.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// ID is the msg_ id of a response: the same Aptix id, so the console and
// the logs find the turn by either.
func ID(responseID string) string { return "msg_" + strings.TrimPrefix(responseID, "resp_") }

// Content blocks of an answer.
type (
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	thinkingBlock struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	redactedBlock struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
)

// contentOf is a response's output as content blocks, in order, each with
// the output item id it came from: text parts as text blocks, function
// calls as tool_use (the arguments as input), reasoning items that carry
// an Anthropic signature as thinking (or redacted_thinking) blocks. A
// reasoning item without one (another backend's) has no block a client
// could send back, and is left out. refused says a refusal part was seen.
func contentOf(r responses.Response) (blocks []any, ids []string, refused bool) {
	for _, it := range r.Items() { // the typed result's items, not decoded again
		if it.StopSequence != nil {
			blocks, ids = append(blocks, stopAt(*it.StopSequence)), append(ids, "")
		}
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					blocks, ids = append(blocks, textBlock{"text", c.Text}), append(ids, it.ID)
				case "refusal":
					refused = true
					blocks, ids = append(blocks, textBlock{"text", c.Refusal}), append(ids, it.ID)
				}
			}
		case "function_call":
			input := json.RawMessage(it.Arguments)
			if !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			blocks, ids = append(blocks, toolUseBlock{"tool_use", it.CallID, it.Name, input}), append(ids, it.ID)
		case "reasoning":
			if it.EncryptedContent == nil || *it.EncryptedContent == "" {
				continue
			}
			if it.Redacted {
				blocks, ids = append(blocks, redactedBlock{"redacted_thinking", *it.EncryptedContent}), append(ids, it.ID)
				continue
			}
			var text strings.Builder
			for _, c := range it.Content {
				text.WriteString(c.Text)
			}
			blocks, ids = append(blocks, thinkingBlock{"thinking", text.String(), *it.EncryptedContent}), append(ids, it.ID)
		}
	}
	return blocks, ids, refused
}

// stopAt marks, among the blocks contentOf reads, the stop sequence an
// answer stopped at; it is no content block (blocksOnly drops it).
type stopAt string

// blocksOnly drops the stopAt marks.
func blocksOnly(blocks []any, ids []string) ([]any, []string) {
	var b []any
	var i []string
	for k, v := range blocks {
		if _, ok := v.(stopAt); !ok {
			b, i = append(b, v), append(i, ids[k])
		}
	}
	return b, i
}

// StopSequence is the stop sequence a response stopped at, or nil.
func StopSequence(r responses.Response) *string {
	blocks, _, _ := contentOf(r)
	for _, b := range blocks {
		if s, ok := b.(stopAt); ok {
			v := string(s)
			return &v
		}
	}
	return nil
}

// StopReason is the stop_reason of a response: max_tokens when it stopped
// at max_output_tokens, refusal when a filter or the model refused,
// stop_sequence when an Anthropic backend said so, tool_use when it ends
// in tool calls, else end_turn.
func StopReason(r responses.Response) string {
	blocks, _, refused := contentOf(r)
	if r.Status == responses.StatusIncomplete {
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(r.IncompleteDetails, &d)
		switch d.Reason {
		case "max_output_tokens":
			return "max_tokens"
		case "content_filter":
			return "refusal"
		}
	}
	if refused {
		return "refusal"
	}
	if StopSequence(r) != nil {
		return "stop_sequence"
	}
	for _, b := range blocks {
		if _, ok := b.(toolUseBlock); ok {
			return "tool_use"
		}
	}
	return "end_turn"
}

// UsageOf is a response's usage in Anthropic's terms: the cached input
// tokens as cache reads, those written to the cache as cache creation, the
// rest as input_tokens.
func UsageOf(r responses.Response) Usage {
	u := r.Usage
	if u == nil {
		return Usage{}
	}
	cached, written := u.InputTokensDetails.CachedTokens, u.InputTokensDetails.CacheWriteTokens
	return Usage{InputTokens: max(0, u.InputTokens-cached-written), CacheReadInputTokens: cached, CacheCreationInputTokens: written, OutputTokens: u.OutputTokens}
}

// FromResponse is the Messages answer of a completed (or incomplete)
// response. A failed one is an error instead (Failed).
func FromResponse(r responses.Response) Message {
	all, ids, _ := contentOf(r)
	blocks, _ := blocksOnly(all, ids)
	if blocks == nil {
		blocks = []any{}
	}
	return Message{ID: ID(r.ID), Type: "message", Role: "assistant", Model: r.Model, Content: blocks,
		StopReason: StopReason(r), StopSequence: StopSequence(r), Usage: UsageOf(r)}
}

// Failed is the error a response that did not complete answers with
// (failed or cancelled), or nil.
func Failed(r responses.Response) *responses.Error {
	switch r.Status {
	case responses.StatusFailed:
		msg := "The response failed."
		e := responses.Internal("server_error", msg)
		if r.Error != nil {
			e.Message = r.Error.Message
			if r.Error.Code == "rate_limit_exceeded" {
				e.Status = http.StatusTooManyRequests
			}
		}
		return e
	case responses.StatusCancelled:
		e := responses.BadRequest("", "cancelled", "The request was cancelled before it completed.")
		e.Status = 499
		return e
	}
	return nil
}

// ErrorBody is Anthropic's error document for e, with the status it goes
// with: 400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503 and 529 overloaded_error (as 529), 504
// timeout_error, other 5xx api_error.
func ErrorBody(e *responses.Error) (status int, body any) {
	status = e.Status
	typ := "api_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusServiceUnavailable || status == 529:
		status, typ = 529, "overloaded_error"
	case status == http.StatusGatewayTimeout:
		typ = "timeout_error"
	case status >= 400 && status < 500:
		typ = "invalid_request_error"
	}
	return status, ErrorDoc(typ, e.Message)
}

// ErrorDoc is {"type":"error","error":{"type":…,"message":…}}.
func ErrorDoc(typ, msg string) any {
	return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
}
