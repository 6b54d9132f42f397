package application

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// newIDs returns a turn id (UUIDv7, like every Aptix client) and the
// response id derived from it: Aptix's own resp_…, never the upstream's.
func newIDs() (turnID, responseID string) {
	u := uuid.Must(uuid.NewV7())
	return u.String(), "resp_" + hex.EncodeToString(u[:])
}

// NewResponseID is a fresh resp_… id for a response that runs no turn (a
// WebSocket warm-up).
func NewResponseID() string {
	_, id := newIDs()
	return id
}

func newConversationID() string { return "c-" + uuid.Must(uuid.NewV7()).String() }

// firstConversation is the id of the conversation a response starts (a new
// one, or a branch): named after the response's own turn, so the response's
// record says it is the conversation's first (startsConversation).
func firstConversation(turnID string) string { return "c-" + turnID }

// startsConversation reports whether m is the first response of its
// conversation: while no continuation has claimed that conversation's
// head, no head is written and m is the head.
func startsConversation(m *responses.Meta) bool {
	return m.NamedConversation == "" && m.ConversationID == firstConversation(m.TurnID)
}

// Prior is a response the caller already holds in memory (a WebSocket's
// previous response): what a continuation of it needs, so the prepare
// path reads neither its record (KV) nor its completed event (stream).
type Prior struct {
	meta *responses.Meta
	// continueFrom is the upstream response id a continuation continues.
	continueFrom string
	// headRev is the KV revision of the conversation head this gateway
	// wrote when meta became the head (0: unknown, read it).
	headRev uint64
	// callIDs are the call_ids of the function_call items of its output.
	callIDs map[string]bool
}

// ID is the response id of the prior response.
func (p *Prior) ID() string { return p.meta.ID }

// CallIDs are the call_ids of the function calls the prior response made.
func (p *Prior) CallIDs() map[string]bool { return p.callIDs }

// prepared is what prepare made: the response record, the turn to
// submit, the head revision it wrote (0 when it wrote none), and the wait
// for the record's write, which runs while the turn is submitted
// (record.go).
type prepared struct {
	meta     *responses.Meta
	exec     contracts.AgentExecuteRequest
	headRev  uint64
	recorded func() error
}

// continuation is the upstream response id a continuation of prev continues:
// the completed turn's, or, for a failed one (it has none), what prev
// itself continued.
func continuation(prev *responses.Meta, t *contracts.Turn) string {
	if t != nil && t.Response != nil && t.Response.ResponseContinuationId != "" && responses.Failure(t) == nil {
		return t.Response.ResponseContinuationId
	}
	return prev.ContinuedFrom
}

// source is where a new response's turn runs and what it continues: the
// previous response (and the head revision known for it), or a
// conversation object's items, or a named conversation (in target).
type source struct {
	prev    *responses.Meta
	headRev uint64
	// history are a conversation object's items, object its id.
	history []json.RawMessage
	object  string
}

// prepare resolves the backend, the conversation (new, continued, or a
// branch), records the response (record) and builds the execute request.
//
// Branching: previous_response_id names a response P of conversation C. When
// P is C's head (its newest response), the new turn continues C and becomes
// its head (moved atomically, compare-and-set on the head's KV revision).
// A new conversation writes no head: its first response is its head until
// a continuation claims it, by creating the head (a create fails when
// another continuation created it first: that one continues C, this one
// branches). Each turn of a named conversation writes the head.
// Otherwise (C went on after P, or a concurrent continuation of P won the
// head) the turn starts a new conversation seeded from P: it continues from
// P's upstream response id, so its history is exactly the chain up to P and
// never a later turn of C, on backends with previous_response_id and on
// those whose history Aptix replays (kept per response id).
//
// A detached turn (a compaction's summary) always runs in a new conversation
// seeded like a branch, moves no head and keeps no record: it is not part of
// any chain a client continues.
//
// With known, the response req continues when it is that one, the
// continuation is resolved from memory and the head is moved with one
// compare-and-set at its known revision.
//
// The caller who owns the new response; another principal's
// previous_response_id answers as an unknown one, and a conversation named
// by an authenticated caller is scoped to it (scopeConversation), so
// callers never share one.
//
// A conversation object (conversation "conv_…", conversations.go) is
// neither: its settled items go first in the turn's input, marked as the
// whole history so the envelope continues no earlier response; the turn
// runs in the Aptix conversation of the object's id, moves no head, and
// joins the object (input now, output once settled) before it is submitted.
func (a *App) prepare(ctx context.Context, who auth.Principal, req *responses.CreateRequest, detached bool, known *Prior, turnID, respID string) (prepared, *responses.Error) {
	var p prepared
	// Compaction items turn back into their summaries before anything else
	// reads the input: one that does not open is the client's 400.
	in, e := responses.OpenCompactions(req.Input, a.cfg.CompactionKeys, who.ID)
	if e != nil {
		return p, e
	}
	req.Input = in
	backend, model, e := responses.Resolve(a.cfg.Profiles, req.Model)
	if e != nil {
		return p, e
	}
	budgets, e := a.checkBudgets(ctx, who) // before anything of the turn is written
	if e != nil {
		return p, e
	}
	target := a.target(req, turnID, backend, model)
	src, e := a.source(ctx, who.ID, req, detached, known, respID, &target)
	if e != nil {
		return p, e
	}
	// Everything the client can get wrong is checked before a head moves.
	if p.exec, e = execFor(req, src, target); e != nil {
		return p, e
	}
	m, e := responses.MetaFor(req)
	if e != nil {
		return p, e
	}
	var headSet func() error
	if headSet, e = a.moveHead(ctx, req, detached, src, respID, &target, &p); e != nil {
		return p, e
	}
	// A response that starts its conversation (a new one, or a branch) runs
	// in one named after its own turn, which nothing was recorded under:
	// the envelope skips reading the conversation's record.
	p.exec.NewConversation = p.exec.ConversationId == firstConversation(turnID)
	if src.prev != nil && p.exec.ConversationId != src.prev.ConversationID {
		// A branch continues a response of another conversation: recovery
		// finds the calls before the branch in that one's events.
		p.exec.ContinuationConversation = src.prev.ConversationID
	}
	p.exec.Principal, p.exec.Budgets, p.exec.KeyId = who.ID, budgets, who.KeyID
	meta := &m
	meta.ID, meta.ConversationID, meta.TurnID, meta.Owner = respID, target.ConversationID, turnID, who.ID
	meta.CreatedAt, meta.ContinuedFrom, meta.HistoryItems = a.cfg.Now().Unix(), target.ContinueFrom, len(src.history)
	if meta.Model == "" {
		if pr, err := a.cfg.Profiles.Get(backend); err == nil {
			meta.Model = pr.Model("")
		}
	}
	p.meta = meta
	if e := a.record(ctx, req, detached, src.object, &p, headSet); e != nil {
		return prepared{}, e
	}
	return p, nil
}

// target is where req's turn goes before its conversation is resolved: a
// new conversation named after the turn, and the profile's alias rule.
func (a *App) target(req *responses.CreateRequest, turnID, backend, model string) responses.Target {
	target := responses.Target{TurnID: turnID, Backend: backend, Model: model, ConversationID: firstConversation(turnID)}
	if pr, err := a.cfg.Profiles.Get(backend); err == nil {
		if rule, ok := pr.Rule(req.Model); ok {
			target.Rule = &rule
		}
	}
	return target
}

// source resolves what req continues (previous_response_id, a
// conversation object, a named conversation) and sets target's
// conversation and continuation accordingly.
func (a *App) source(ctx context.Context, owner string, req *responses.CreateRequest, detached bool, known *Prior, respID string, target *responses.Target) (source, *responses.Error) {
	var src source
	switch {
	case req.PreviousID != "" && known != nil && known.meta.ID == req.PreviousID:
		src.prev, src.headRev = known.meta, known.headRev
		target.ContinueFrom = known.continueFrom
	case req.PreviousID != "":
		prev, from, e := a.previous(ctx, owner, req.PreviousID)
		if e != nil {
			return src, e
		}
		src.prev, target.ContinueFrom = prev, from
	case req.Conversation != "" && !detached && strings.HasPrefix(req.Conversation, responses.ConversationPrefix):
		// A conversation object: its items are the model's prior context,
		// sent whole with the turn, which runs in the Aptix conversation of
		// the same id (no scoping: the object's owner is checked instead).
		c, h, e := a.objectHistory(ctx, owner, req.Conversation)
		if e != nil {
			return src, e
		}
		src.history = h
		target.ConversationID, src.object = c.ID, c.ID
		// The input joins the conversation: its ids must name it uniquely
		// (checked again, atomically, when it is added).
		input := responses.InputItems(respID, req.Input)
		if e := responses.CheckItemIDs("input", input); e != nil {
			return src, e
		}
		if taken := c.TakenID(input); taken != "" {
			return src, responses.DuplicateItem(taken)
		}
	case req.Conversation != "" && !detached:
		conv, e := namedConversation(owner, req.Conversation)
		if e != nil {
			return src, e
		}
		target.ConversationID = conv // the envelope continues its newest response
	}
	return src, nil
}

// previous reads the response id names for a continuation by owner: its
// record, and the upstream response id the continuation continues. It
// must be owner's, and completed.
func (a *App) previous(ctx context.Context, owner, id string) (*responses.Meta, string, *responses.Error) {
	prev, err := a.lookup(ctx, id)
	if err != nil {
		return nil, "", a.BusError(err)
	}
	if prev == nil || prev.Owner != owner {
		return nil, "", responses.PreviousNotFound(id)
	}
	stage, pt, _, err := a.turnAt(ctx, prev.ConversationID, prev.TurnID)
	if err != nil {
		return nil, "", a.BusError(err)
	}
	switch {
	case stage == "":
		return nil, "", responses.PreviousNotFound(id) // its events are past retention
	case stage != contracts.StageCompleted:
		return nil, "", responses.PreviousInProgress(id)
	}
	return prev, continuation(prev, pt), nil
}

// namedConversation is the Aptix conversation a conversation parameter
// names, scoped to its caller.
func namedConversation(owner, conv string) (string, *responses.Error) {
	if !contracts.IsToken(conv) {
		return "", responses.BadRequest("conversation", responses.CodeInvalidValue,
			"Invalid 'conversation': must match [A-Za-z0-9_-]{1,128}.")
	}
	scoped, ok := scopeConversation(owner, conv)
	if !ok {
		return "", responses.BadRequest("conversation", responses.CodeInvalidValue,
			fmt.Sprintf("Invalid 'conversation': at most %d characters for this caller.", contracts.MaxIDLen-scopeLen))
	}
	return scoped, nil
}

// execFor is the execute request of req's turn: in a conversation
// object, the object's items go first, as the whole history.
func execFor(req *responses.CreateRequest, src source, target responses.Target) (contracts.AgentExecuteRequest, *responses.Error) {
	sent := req
	if src.object != "" {
		withHistory := *req
		withHistory.Input = append(append([]json.RawMessage{}, src.history...), req.Input...)
		sent = &withHistory
	}
	exec, e := responses.ToExecute(sent, target)
	if e != nil {
		return exec, e
	}
	if src.object != "" {
		exec.OpenAI.WholeHistory = true
	}
	return exec, nil
}

// moveHead moves the conversation head for a new response respID: a
// continuation claims the head of its previous response's conversation
// (and runs there, or branches when it lost), a named conversation's turn
// sets it, concurrently with the response record (one store round trip on
// the create's path instead of two): headSet waits for that write. A new
// conversation (or a branch) writes no head: its first response is its
// head.
func (a *App) moveHead(ctx context.Context, req *responses.CreateRequest, detached bool, src source, respID string, target *responses.Target, p *prepared) (headSet func() error, e *responses.Error) {
	headSet = func() error { return nil }
	if detached || src.object != "" {
		return headSet, nil
	}
	if src.prev != nil {
		same, rev, err := a.claim(ctx, src, respID)
		if err != nil {
			return nil, a.BusError(err)
		}
		p.headRev = rev
		if same {
			target.ConversationID = src.prev.ConversationID
			p.exec.ConversationId = src.prev.ConversationID
		}
		return headSet, nil
	}
	if req.Conversation == "" {
		return headSet, nil
	}
	headDone := make(chan error, 1)
	go func(conv string) {
		rev, err := a.store.setHead(ctx, conv, respID)
		p.headRev = rev
		headDone <- err
	}(target.ConversationID)
	var err error
	waited := false
	return func() error {
		if !waited {
			err, waited = <-headDone, true
		}
		return err
	}, nil
}

// claim moves the head of src.prev's conversation to next: at the known
// revision, by creating it (prev started its conversation), or from prev.
func (a *App) claim(ctx context.Context, src source, next string) (bool, uint64, error) {
	prev := src.prev
	switch {
	case src.headRev != 0:
		return a.store.ClaimHeadAt(ctx, prev.ConversationID, next, src.headRev)
	case startsConversation(prev):
		return a.store.claimFirst(ctx, prev.ConversationID, next)
	default:
		return a.store.claimHead(ctx, prev.ConversationID, prev.ID, next)
	}
}

// record keeps the response (with store, OpenAI's: with store false it
// is answered, not kept, so GET and previous_response_id do not find it):
// its record travels in the turn's request, and is also written to the
// bucket when the response's id does not name its conversation (record.go)
// — a write that runs on while the turn is submitted: p.recorded waits for
// it. Once the head write succeeded, its input goes into its conversation
// object before the submit, so the conversation never misses a turn that
// ran (a submit that fails withdraws it).
func (a *App) record(ctx context.Context, req *responses.CreateRequest, detached bool, object string, p *prepared, headSet func() error) *responses.Error {
	meta := p.meta
	p.recorded = func() error { return nil }
	kept := !detached && req.Store
	if kept {
		if e := carry(&p.exec, meta); e != nil {
			_ = headSet()
			return e
		}
		if !derivable(meta) {
			p.recorded = a.writeRecord(ctx, *meta)
		}
	}
	// undo takes the record back when the turn is not submitted after all.
	undo := func() {
		if kept {
			_ = p.recorded()
			_ = a.store.Delete(ctx, meta.ID)
		}
	}
	if err := headSet(); err != nil {
		undo()
		return a.BusError(err)
	}
	if object == "" {
		return nil
	}
	input := responses.InputItems(meta.ID, req.Input)
	if err := a.add(ctx, object, input, func(c *responses.Conversation) { c.AppendPending(*meta, input) }); err != nil {
		undo()
		return a.convError(object, err)
	}
	return nil
}
