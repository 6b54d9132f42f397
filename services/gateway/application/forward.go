package application

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/redact"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Forwarded is a backend's own answer to a request the gateway forwarded
// to it (a compaction, a token count): its status and JSON body, which a
// door relays as they are.
type Forwarded struct {
	Status int
	Body   []byte
}

// ForwardCompact sends the compaction to the backend's own
// /responses/compact (CompactForward names it) and returns its answer,
// status and body as they are (an upstream error keeps its status, as for
// a turn). The compaction items
// are the backend's, which only it can read back: the next request carries
// them upstream untouched.
func (a *App) ForwardCompact(ctx context.Context, p profiles.Profile, model string, req *responses.CreateRequest, input []json.RawMessage) (Forwarded, *responses.Error) {
	body := map[string]any{"model": model, "input": input}
	if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	return a.relayToBackend(ctx, p, "/responses/compact", "compact", body)
}

// relayToBackend posts body to a backend endpoint of p (its key and
// headers, as a turn's call sends them) and returns the answer, status and
// body as they are: an upstream error keeps its status, as for a turn, with
// credentials redacted from its body.
func (a *App) relayToBackend(ctx context.Context, p profiles.Profile, path, what string, body map[string]any) (Forwarded, *responses.Error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Forwarded{}, responses.Internal("encode_"+what, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.SyncTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return Forwarded{}, responses.Internal(what+"_request", err.Error())
	}
	hr.Header.Set("Content-Type", "application/json")
	if key := p.APIKey(); key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range p.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return Forwarded{}, &responses.Error{Status: http.StatusBadGateway, Type: responses.TypeServer, Code: ptr("upstream_unreachable"),
			Message: fmt.Sprintf("backend %s: %s: %v", p.Name, what, err)}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		return Forwarded{}, &responses.Error{Status: http.StatusBadGateway, Type: responses.TypeServer, Code: ptr("upstream_read_failed"),
			Message: fmt.Sprintf("backend %s: %s: %v", p.Name, what, err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Upstream error text enters Aptix here as in the LLM caller: a
		// backend echoing the key it got must not hand it to the client.
		out = []byte(redact.New(p.Credentials()...).String(string(out)))
	}
	return Forwarded{Status: resp.StatusCode, Body: out}, nil
}

// countFields are the create parameters OpenAI's input_tokens endpoint
// takes besides model, input, instructions, tools and previous_response_id.
var countFields = []string{"text", "reasoning", "truncation", "parallel_tool_calls"}

// ForwardCount asks the backend's own /responses/input_tokens, with the
// system prompt as the envelope sends it (a system message opening a first
// turn) and the upstream response the previous one continued, and returns
// its answer as it is.
func (a *App) ForwardCount(ctx context.Context, c Count, req *responses.CreateRequest) (Forwarded, *responses.Error) {
	p, upstreamPrev := c.Profile, c.UpstreamPrev
	body := map[string]any{"model": c.Model}
	input := req.Input
	if req.Instructions != "" && upstreamPrev == "" {
		sys, _ := json.Marshal(map[string]any{"type": "message", "role": "system",
			"content": []map[string]string{{"type": "input_text", "text": req.Instructions}}})
		input = append([]json.RawMessage{sys}, input...)
	} else if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	if len(input) > 0 {
		body["input"] = input
	}
	if upstreamPrev != "" {
		body["previous_response_id"] = upstreamPrev
	}
	if len(req.Tools) > 0 {
		body["tools"] = req.Tools
	}
	if len(req.ToolChoiceRaw) > 0 {
		body["tool_choice"] = req.ToolChoiceRaw
	}
	for _, k := range countFields {
		if v, ok := req.Fields[k]; ok {
			body[k] = v
		}
	}
	return a.relayToBackend(ctx, p, "/responses/input_tokens", "input_tokens", body)
}

// ForwardCountTokens posts the client's count request to an Anthropic
// backend's /messages/count_tokens as sent but for the model (and
// max_tokens, which the count does not take), with the profile's key as
// x-api-key and the client's anthropic-version and anthropic-beta, and
// returns the answer, status and body as they are (an error body with the
// credentials redacted).
func (a *App) ForwardCountTokens(ctx context.Context, p profiles.Profile, model string, data []byte, version, beta string) (Forwarded, *responses.Error) {
	var body map[string]json.RawMessage
	if json.Unmarshal(data, &body) != nil || body == nil {
		return Forwarded{}, responses.BadRequest("", responses.CodeInvalidJSON, "The request body must be a JSON object.")
	}
	delete(body, "max_tokens")
	body["model"], _ = json.Marshal(model)
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, a.cfg.SyncTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+"/messages/count_tokens", bytes.NewReader(b))
	if err != nil {
		return Forwarded{}, responses.Internal("count_tokens_request", err.Error())
	}
	hr.Header.Set("Content-Type", "application/json")
	if key := p.APIKey(); key != "" {
		hr.Header.Set("X-Api-Key", key)
	}
	hr.Header.Set("Anthropic-Version", cmp.Or(version, p.Anthropic.Version, profiles.DefaultAnthropicVersion))
	if beta != "" {
		hr.Header.Set("Anthropic-Beta", beta)
	}
	for k, v := range p.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return Forwarded{}, &responses.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("backend %s: count_tokens: %v", p.Name, err)}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		return Forwarded{}, &responses.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("backend %s: count_tokens: %v", p.Name, err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		out = []byte(redact.New(p.Credentials()...).String(string(out)))
	}
	return Forwarded{Status: resp.StatusCode, Body: out}, nil
}
