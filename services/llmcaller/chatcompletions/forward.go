package chatcompletions

import (
	"context"
	"fmt"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

type clientBodyKey struct{}

// WithClientBody marks a call whose client spoke Chat Completions
// (contracts.OpenAIPassthrough.Chat): the Transport sends body, the
// client's own request, in place of the translation of the Responses body
// the caller built. It travels in the context because it belongs to the
// one call, below the caller's openai-go client, which knows only the
// Responses body.
func WithClientBody(ctx context.Context, body []byte) context.Context {
	if len(body) == 0 {
		return ctx
	}
	return context.WithValue(ctx, clientBodyKey{}, body)
}

func clientBody(ctx context.Context) []byte {
	b, _ := ctx.Value(clientBodyKey{}).([]byte)
	return b
}

// Forward is the request a Chat Completions client sent, ready to go to
// the server with quirks q: every member as the client wrote it but the
// routing and the call's own flags, taken from the Responses body the
// caller built (responsesBody): the model the profile serves the client's
// model name as, and stream (with stream_options.include_usage, which the
// caller needs for usage and budgets, unless the server refuses
// stream_options). The server's quirks that would otherwise make it refuse
// or ignore what the client said apply, as to every request to it: a
// developer message goes as system without DeveloperRole, an all-text
// content array as one string with FlattenText, max_completion_tokens as
// max_tokens when TokenLimitField says the server reads only that; then
// ExtraBody and DropFields.
func Forward(client, responsesBody []byte, q profiles.Chat) ([]byte, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(client, &out); err != nil || out == nil {
		return nil, reqErr("", "invalid_json", "the client's chat completions body is not a JSON object: %v", err)
	}
	var call struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(responsesBody, &call); err != nil {
		return nil, reqErr("", "invalid_json", "request body is not a Responses request: %v", err)
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	if call.Model != "" {
		set("model", call.Model)
	}
	if call.Stream {
		set("stream", true)
		if q.NoStreamOptions {
			delete(out, "stream_options")
		} else {
			opts := map[string]json.RawMessage{}
			if isSet(out["stream_options"]) {
				_ = json.Unmarshal(out["stream_options"], &opts)
			}
			opts["include_usage"] = json.RawMessage("true")
			set("stream_options", opts)
		}
	} else {
		delete(out, "stream")
		delete(out, "stream_options")
	}
	if err := quirks(out, q); err != nil {
		return nil, err
	}
	for k, v := range q.ExtraBody {
		set(k, v)
	}
	for _, k := range q.DropFields {
		delete(out, k)
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode chat completions request: %w", err)
	}
	return enc, nil
}

// quirks rewrites what server q cannot take as the client wrote it; a
// body that needs none of it keeps its messages byte for byte.
func quirks(out map[string]json.RawMessage, q profiles.Chat) error {
	if q.TokenLimitField == profiles.TokenLimitMaxTokens && isSet(out["max_completion_tokens"]) && !isSet(out["max_tokens"]) {
		out["max_tokens"] = out["max_completion_tokens"]
		delete(out, "max_completion_tokens")
	}
	if q.DeveloperRole && !q.FlattenText {
		return nil
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(out["messages"], &msgs); err != nil {
		return reqErr("messages", "invalid_type", "messages must be an array of message objects: %v", err)
	}
	changed := false
	for _, m := range msgs {
		if !q.DeveloperRole && string(m["role"]) == `"developer"` {
			m["role"], changed = json.RawMessage(`"system"`), true
		}
		if !q.FlattenText {
			continue
		}
		var parts []inputPart
		if json.Unmarshal(m["content"], &parts) != nil || len(parts) < 2 {
			continue
		}
		if texts, ok := allText(parts); ok {
			m["content"], _ = json.Marshal(strings.Join(texts, "\n\n"))
			changed = true
		}
	}
	if changed {
		b, err := json.Marshal(msgs)
		if err != nil {
			return fmt.Errorf("encode messages: %w", err)
		}
		out["messages"] = b
	}
	return nil
}
