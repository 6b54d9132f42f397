package application

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/tokens"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// maxHistory bounds how many responses a local count walks back through
// previous_response_id.
const maxHistory = 512

// Count is what an input-token count found: the tokens counted here, or
// the backend that counts them itself (Forward).
type Count struct {
	Tokens int
	// Forward: the backend serves /responses/input_tokens; ask Profile
	// for Model, continuing UpstreamPrev.
	Forward      bool
	Profile      profiles.Profile
	Model        string
	UpstreamPrev string
}

// CountInput counts the input tokens of the request Aptix would send
// upstream for req (the system prompt, the history a previous_response_id
// replays, the input, the tools), without running it. A backend that
// serves the endpoint (capabilities.inputTokens) counts it with its own
// tokenizer, continuing the upstream response the previous one did
// (Count.Forward); any other is counted here with OpenAI's BPE
// (pkg/pipeline/tokens). previous_response_id and a conversation object
// follow the rules of a create: another caller's does not exist (404).
// req.Input is changed: compaction items opened, a conversation object's
// items ahead of it.
func (a *App) CountInput(ctx context.Context, who auth.Principal, req *responses.CreateRequest) (Count, *responses.Error) {
	var c Count
	var e *responses.Error
	// As on create: the gateway's compaction items are counted as the
	// summaries they stand for, and one that does not open is the client's 400.
	if req.Input, e = a.OpenCompactions(who, req.Input); e != nil {
		return c, e
	}
	if req.Conversation != "" && !strings.HasPrefix(req.Conversation, responses.ConversationPrefix) {
		return c, responses.BadRequest("conversation", responses.CodeInvalidValue,
			"Counting the history of an Aptix conversation is not supported; name its newest response with previous_response_id, or count in a conversation object (conv_...).")
	}
	backend, model, e := responses.Resolve(a.cfg.Profiles, req.Model)
	if e != nil {
		return c, e
	}
	if req.Conversation != "" {
		// A conversation object: its items go ahead of the input, whole, as
		// a create in it sends them (no upstream response is continued).
		_, history, e := a.objectHistory(ctx, who.ID, req.Conversation)
		if e != nil {
			return c, e
		}
		req.Input = append(history, req.Input...)
	}
	p, err := a.cfg.Profiles.Get(backend)
	if err != nil {
		return c, responses.Internal("no_backend", err.Error())
	}
	var prev *responses.Meta
	var pt *contracts.Turn
	if req.PreviousID != "" {
		if prev, pt, e = a.countPrevious(ctx, who.ID, req.PreviousID); e != nil {
			return c, e
		}
	}
	upstreamPrev := ""
	if prev != nil {
		upstreamPrev = continuation(prev, pt)
	}
	if p.Capabilities.InputTokens && p.API != profiles.APIChatCompletions &&
		(prev == nil || (upstreamPrev != "" && p.Capabilities.SupportsPreviousResponseID)) {
		return Count{Forward: true, Profile: p, Model: p.Model(model), UpstreamPrev: upstreamPrev}, nil
	}
	count := tokens.Request{Model: p.Model(model), Instructions: req.Instructions, Tools: req.Tools}
	if prev != nil {
		system, items, e := a.history(ctx, prev, pt)
		if e != nil {
			return c, e
		}
		count.Items = items
		if count.Instructions == "" {
			count.Instructions = system
		}
	}
	count.Items = append(count.Items, req.Input...)
	n, err := tokens.Count(count)
	if err != nil {
		return c, responses.Internal("count_tokens", err.Error())
	}
	return Count{Tokens: n}, nil
}

// countPrevious reads the response a count continues: the caller's own,
// completed (its history is what the count replays).
func (a *App) countPrevious(ctx context.Context, owner, id string) (*responses.Meta, *contracts.Turn, *responses.Error) {
	prev, err := a.lookup(ctx, id)
	if err != nil {
		return nil, nil, a.BusError(err)
	}
	if prev == nil || prev.Owner != owner {
		return nil, nil, responses.CountPreviousNotFound(id)
	}
	stage, t, _, err := a.turnAt(ctx, prev.ConversationID, prev.TurnID)
	switch {
	case err != nil:
		return nil, nil, a.BusError(err)
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
func (a *App) history(ctx context.Context, prev *responses.Meta, pt *contracts.Turn) (system string, items []json.RawMessage, e *responses.Error) {
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
		next, err := a.lookup(ctx, m.PreviousID)
		if err != nil {
			return "", nil, a.BusError(err)
		}
		if next == nil || next.Owner != m.Owner {
			break
		}
		m = next
		if _, t, _, err = a.turnAt(ctx, m.ConversationID, m.TurnID); err != nil {
			return "", nil, a.BusError(err)
		}
	}
	slices.Reverse(segs)
	for _, seg := range segs {
		items = append(items, seg...)
	}
	return system, items, nil
}
