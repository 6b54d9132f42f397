package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// inputTokens is POST /v1/responses/input_tokens (application.CountInput):
// counted here, or by the backend's own endpoint (forwardCount), whose
// answer is relayed as it is.
func (s *Server) inputTokens(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	req, e := responses.ParseCount(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	if v := req.IgnoredValue(); v != "" {
		w.Header().Set(responses.IgnoredHeader, v)
	}
	c, e := s.app.CountInput(r.Context(), auth.From(r.Context()), req)
	if e != nil {
		s.fail(w, e)
		return
	}
	if c.Forward {
		s.forwardCount(r.Context(), w, c.Profile, c.Model, req, c.UpstreamPrev)
		return
	}
	writeJSON(w, http.StatusOK, responses.NewInputTokens(c.Tokens))
}

// countFields are the create parameters OpenAI's input_tokens endpoint
// takes besides model, input, instructions, tools and previous_response_id.
var countFields = []string{"text", "reasoning", "truncation", "parallel_tool_calls"}

// forwardCount asks the backend's own /responses/input_tokens, with the
// system prompt as the envelope sends it (a system message opening a first
// turn) and the upstream response the previous one continued, and relays
// its answer as it is.
func (s *Server) forwardCount(ctx context.Context, w http.ResponseWriter, p profiles.Profile, model string, req *responses.CreateRequest, upstreamPrev string) {
	body := map[string]any{"model": model}
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
	s.relayToBackend(ctx, w, p, "/responses/input_tokens", "input_tokens", body)
}
