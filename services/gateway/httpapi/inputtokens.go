package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/tokens"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// maxHistory bounds how many responses a local count walks back through
// previous_response_id.
const maxHistory = 512

// inputTokens is POST /v1/responses/input_tokens: the input tokens of the
// request Aptix would send upstream for this body (the system prompt, the
// history a previous_response_id replays, the input, the tools), without
// running it. A backend that serves the endpoint (capabilities.inputTokens)
// counts it with its own tokenizer, continuing the upstream response the
// previous one did; any other is counted here with OpenAI's BPE
// (services/gateway/tokens). previous_response_id and a conversation
// object follow the rules of a create: another caller's does not exist (404).
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
	// As on create: the gateway's compaction items are counted as the
	// summaries they stand for, and one that does not open is the client's 400.
	if req.Input, e = responses.OpenCompactions(req.Input, s.cfg.CompactionKeys, principal(r.Context())); e != nil {
		s.fail(w, e)
		return
	}
	if req.Conversation != "" && !strings.HasPrefix(req.Conversation, responses.ConversationPrefix) {
		s.fail(w, responses.BadRequest("conversation", responses.CodeInvalidValue,
			"Counting the history of an Aptix conversation is not supported; name its newest response with previous_response_id, or count in a conversation object (conv_...)."))
		return
	}
	backend, model, e := responses.Resolve(s.cfg.Profiles, req.Model)
	if e != nil {
		s.fail(w, e)
		return
	}
	if req.Conversation != "" {
		// A conversation object: its items go ahead of the input, whole, as
		// a create in it sends them (no upstream response is continued).
		_, history, e := s.objectHistory(r.Context(), req.Conversation)
		if e != nil {
			s.fail(w, e)
			return
		}
		req.Input = append(history, req.Input...)
	}
	p, err := s.cfg.Profiles.Get(backend)
	if err != nil {
		s.fail(w, responses.Internal("no_backend", err.Error()))
		return
	}
	ctx := r.Context()
	var prev *responses.Meta
	var pt *contracts.Turn
	if req.PreviousID != "" {
		if prev, pt, e = s.countPrevious(ctx, req.PreviousID); e != nil {
			s.fail(w, e)
			return
		}
	}
	upstreamPrev := ""
	if prev != nil {
		upstreamPrev = continuation(prev, pt)
	}
	if p.Capabilities.InputTokens && p.API != profiles.APIChatCompletions &&
		(prev == nil || (upstreamPrev != "" && p.Capabilities.SupportsPreviousResponseID)) {
		s.forwardCount(ctx, w, p, p.Model(model), req, upstreamPrev)
		return
	}
	count := tokens.Request{Model: p.Model(model), Instructions: req.Instructions, Tools: req.Tools}
	if prev != nil {
		system, items, e := s.history(ctx, prev, pt)
		if e != nil {
			s.fail(w, e)
			return
		}
		count.Items = items
		if count.Instructions == "" {
			count.Instructions = system
		}
	}
	count.Items = append(count.Items, req.Input...)
	n, err := tokens.Count(count)
	if err != nil {
		s.fail(w, responses.Internal("count_tokens", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, responses.NewInputTokens(n))
}

// countPrevious reads the response a count continues: the caller's own,
// completed (its history is what the count replays).
func (s *Server) countPrevious(ctx context.Context, id string) (*responses.Meta, *contracts.Turn, *responses.Error) {
	prev, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, nil, s.submitError(err)
	}
	if prev == nil || !owns(ctx, prev) {
		return nil, nil, responses.CountPreviousNotFound(id)
	}
	stage, t, _, err := s.turnAt(ctx, prev.ConversationID, prev.TurnID)
	switch {
	case err != nil:
		return nil, nil, s.submitError(err)
	case stage == "":
		return nil, nil, responses.CountPreviousNotFound(id) // past retention
	case stage != contracts.StageCompleted:
		return nil, nil, responses.PreviousInProgress(id)
	}
	return prev, t, nil
}

// history is the conversation up to and including prev, oldest first: each
// response's input items and output, and the system prompt its first turn
// set. A response deleted on the way ends the walk (its history is no
// longer Aptix's to read).
func (s *Server) history(ctx context.Context, prev *responses.Meta, pt *contracts.Turn) (system string, items []json.RawMessage, e *responses.Error) {
	var segs [][]json.RawMessage
	m, t := prev, pt
	for hops := 0; m != nil && t != nil && hops < maxHistory; hops++ {
		var seg []json.RawMessage
		if t.Request.OpenAI != nil {
			_ = json.Unmarshal(t.Request.OpenAI.Input, &seg)
		}
		seg = append(seg, responses.FromTurn(*m, t, 0).Output...)
		segs = append(segs, seg)
		if c := t.Request.ConversationContext; c != nil && c.SystemPrompt != "" {
			system = c.SystemPrompt // the oldest turn's wins: it is the one the upstream holds
		}
		if m.PreviousID == "" {
			break
		}
		next, err := s.store.Get(ctx, m.PreviousID)
		if err != nil {
			return "", nil, s.submitError(err)
		}
		if next == nil || next.Owner != m.Owner {
			break
		}
		m = next
		if _, t, _, err = s.turnAt(ctx, m.ConversationID, m.TurnID); err != nil {
			return "", nil, s.submitError(err)
		}
	}
	slices.Reverse(segs)
	for _, seg := range segs {
		items = append(items, seg...)
	}
	return system, items, nil
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
