package anthropicmessages

import (
	"context"
	"encoding/json"
)

// Client is what a Messages client sent that its call carries
// (contracts.OpenAIPassthrough.Messages): its body, forwarded in place of
// the translation, and its anthropic-version and anthropic-beta headers.
type Client struct {
	Body    []byte
	Version string
	Beta    string
}

type clientKey struct{}

// WithClient marks a call whose client spoke Messages. It travels in the
// context because it belongs to the one call, below the caller's openai-go
// client, which knows only the Responses body.
func WithClient(ctx context.Context, c Client) context.Context {
	if len(c.Body) == 0 && c.Version == "" && c.Beta == "" {
		return ctx
	}
	return context.WithValue(ctx, clientKey{}, c)
}

func clientOf(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}

// Forward is a Messages client's body ready for the backend: every member
// as the client wrote it (messages, thinking blocks and their signatures
// byte for byte: they are copied as raw JSON, never decoded) but the
// routing and the call's own flag, taken from the Responses body the caller
// built: the model the profile serves the client's model name as, and
// stream.
func Forward(client, responsesBody []byte) ([]byte, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal(client, &out); err != nil || out == nil {
		return nil, reqErr("", "the client's Messages body is not a JSON object: %v", err)
	}
	var call struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(responsesBody, &call); err != nil {
		return nil, reqErr("", "the request body is not a Responses request: %v", err)
	}
	if call.Model != "" {
		out["model"], _ = marshal(call.Model)
	}
	if call.Stream {
		out["stream"] = json.RawMessage("true")
	} else {
		delete(out, "stream")
	}
	return marshal(out)
}
