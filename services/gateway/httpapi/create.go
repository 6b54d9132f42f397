package httpapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// newIDs returns a turn id (UUIDv7, like every Aptix client) and the
// response id derived from it: Aptix's own resp_…, never the upstream's.
func newIDs() (turnID, responseID string) {
	u := uuid.Must(uuid.NewV7())
	return u.String(), "resp_" + hex.EncodeToString(u[:])
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

// create is POST /v1/responses.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	req, e := responses.Parse(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	s.setIgnored(w, req) // ignored.go
	if req.WarmupOnly() {
		s.fail(w, responses.BadRequest("generate", responses.CodeInvalidValue,
			"'generate': false (a warm-up that calls no model) is served in WebSocket mode only: over HTTP nothing could continue from it."))
		return
	}
	// A client that goes away does not cancel its turn: everything from here
	// runs on a context detached from the request.
	ctx := context.WithoutCancel(r.Context())
	turnID, respID := newIDs()
	if req.Background {
		ok, err := s.admitBackground(ctx, principal(ctx), respID)
		if err != nil {
			s.fail(w, s.submitError(err))
			return
		}
		if !ok {
			s.tooMany(w, 5*time.Second, fmt.Sprintf("Too many background responses in flight: at most %d queued or running per caller. Retry when one ends.", s.cfg.LimitBackground))
			return
		}
	}
	meta, exec, e := s.prepare(ctx, req, false, turnID, respID)
	if e != nil {
		s.fail(w, e)
		return
	}
	if req.Background {
		s.createBackground(w, r, req, meta, exec)
		return
	}
	run, e := s.submit(ctx, meta, exec, req.Stream, req.Store)
	if e != nil {
		s.fail(w, e)
		return
	}
	defer run.close()
	if req.Stream {
		s.serveEvents(w, r, meta, run.deltas, run.g)
		return
	}
	resp, e := s.outcome(withBackendHeader(ctx, w), meta, run.g)
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// running is a submitted turn a request follows: its live deltas (a
// streamed turn's) and the completion watch it waits on.
type running struct {
	deltas chan *nats.Msg
	sub    *nats.Subscription
	g      *watchGen
}

func (r *running) close() {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}

// submit publishes a prepared turn, what every front door that runs a
// turn and follows it (POST /v1/responses, POST /v1/chat/completions)
// shares: a streamed turn's deltas are subscribed and the completion
// watch taken before the turn exists, so neither can be missed. A submit
// that fails withdraws the prepared response.
func (s *Server) submit(ctx context.Context, meta *responses.Meta, exec contracts.AgentExecuteRequest, stream, stored bool) (*running, *responses.Error) {
	run := &running{}
	// Deltas are core NATS, not stored: subscribe before the turn exists.
	if stream {
		run.deltas = make(chan *nats.Msg, 4096)
		sub, err := s.cfg.NC.ChanSubscribe(contracts.DeltaSubject(meta.ConversationID, meta.TurnID), run.deltas)
		if err != nil {
			s.withdraw(ctx, meta, stored)
			return nil, s.submitError(err)
		}
		run.sub = sub
	}
	run.g = s.comps.acquire(ctx) // before the submit: the watch must predate the completion
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	err := s.enter(sctx, exec)
	cancel()
	if err != nil {
		s.comps.release(run.g)
		run.close()
		s.withdraw(ctx, meta, stored)
		return nil, s.submitError(err)
	}
	return run, nil
}

// outcome waits for a synchronous turn and says what it answers: the
// response, or the error (a failed turn, a timeout, a lost bus).
func (s *Server) outcome(ctx context.Context, meta *responses.Meta, g *watchGen) (responses.Response, *responses.Error) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	t, err := s.comps.wait(wctx, g, meta.ConversationID, meta.TurnID)
	if err == nil {
		s.settleAfter(ctx, meta)
		noteBackend(ctx, &t)
	}
	if errors.Is(err, client.ErrUnreadableCompletion) {
		return responses.Response{}, &responses.Error{Status: http.StatusInternalServerError, Type: responses.TypeServer,
			Message: fmt.Sprintf("Response %s completed, but its result could not be read (%v); GET /v1/responses/%s may return it.", meta.ID, err, meta.ID)}
	}
	if err != nil && s.comps.stopped() {
		return responses.Response{}, responses.Unavailable(fmt.Sprintf("The gateway lost its bus connection while response %s ran; it still completes, and GET /v1/responses/%s returns it.", meta.ID, meta.ID))
	}
	if err != nil {
		return responses.Response{}, &responses.Error{Status: http.StatusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"),
			Message: fmt.Sprintf("Response %s is still running after %s; GET /v1/responses/%s returns it once it completes.", meta.ID, s.cfg.SyncTimeout, meta.ID)}
	}
	if t.Failure != nil && t.Failure.Code == store.CodeCancelled {
		// Cancelled by POST …/cancel while this request waited: the answer
		// is the cancelled response, as GET shows it, not an error.
		if resp, err := s.current(ctx, meta); err == nil {
			return resp, nil
		}
	}
	if t.Failure != nil && t.Failure.Code == contracts.LoopMaxDepthExceeded {
		// docs/http-api.md#server-side-mcp-tools: the response fails with an execution_error and keeps the
		// tool calls that ran, so it is the answer, not an error body.
		return responses.FromTurn(*meta, &t, s.cfg.Now().Unix()), nil
	}
	if fe := responses.Failure(&t); fe != nil {
		return responses.Response{}, fe // the stored response is failed with this error (GET shows it)
	}
	return responses.FromTurn(*meta, &t, s.cfg.Now().Unix()), nil
}

func ptr(s string) *string { return &s }

// prepare resolves the backend, the conversation (new, continued, or a
// branch), records the response and builds the execute request.
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
func (s *Server) prepare(ctx context.Context, req *responses.CreateRequest, detached bool, turnID, respID string) (*responses.Meta, contracts.AgentExecuteRequest, *responses.Error) {
	p, e := s.prepareFrom(ctx, req, detached, nil, turnID, respID)
	if e != nil {
		return nil, contracts.AgentExecuteRequest{}, e
	}
	return p.meta, p.exec, nil
}

// prior is a response the caller already holds in memory (a WebSocket's
// previous response): what a continuation of it needs, so prepareFrom reads
// neither its record (KV) nor its completed event (stream).
type prior struct {
	meta *responses.Meta
	// continueFrom is the upstream response id a continuation continues.
	continueFrom string
	// headRev is the KV revision of the conversation head this gateway
	// wrote when meta became the head (0: unknown, read it).
	headRev uint64
	// callIDs are the call_ids of the function_call items of its output.
	callIDs map[string]bool
}

// prepared is what prepareFrom made: the response record, the turn to
// submit, and the head revision it wrote (0 when it wrote none).
type prepared struct {
	meta    *responses.Meta
	exec    contracts.AgentExecuteRequest
	headRev uint64
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

// prepareFrom is prepare with an optional prior: when it is the response
// req continues, the continuation is resolved from memory and the head is
// moved with one compare-and-set at its known revision.
//
// The caller (the principal in ctx) owns the new response; another
// principal's previous_response_id answers as an unknown one, and a
// conversation named by an authenticated caller is scoped to it
// (scopeConversation), so callers never share one.
//
// A conversation object (conversation "conv_…", conversations.go) is
// neither: its settled items go first in the turn's input, marked as the
// whole history so the envelope continues no earlier response; the turn
// runs in the Aptix conversation of the object's id, moves no head, and
// joins the object (input now, output once settled) before it is submitted.
func (s *Server) prepareFrom(ctx context.Context, req *responses.CreateRequest, detached bool, known *prior, turnID, respID string) (prepared, *responses.Error) {
	var p prepared
	// Compaction items turn back into their summaries before anything else
	// reads the input: one that does not open is the client's 400.
	in, e := responses.OpenCompactions(req.Input, s.cfg.CompactionKeys, principal(ctx))
	if e != nil {
		return p, e
	}
	req.Input = in
	backend, model, e := responses.Resolve(s.cfg.Profiles, req.Model)
	if e != nil {
		return p, e
	}
	owner := principal(ctx)
	budgets, e := s.checkBudgets(ctx) // before anything of the turn is written
	if e != nil {
		return p, e
	}
	target := responses.Target{TurnID: turnID, Backend: backend, Model: model, ConversationID: firstConversation(turnID)}
	if pr, err := s.cfg.Profiles.Get(backend); err == nil {
		if rule, ok := pr.Rule(req.Model); ok {
			target.Rule = &rule
		}
	}
	var prev *responses.Meta
	var headRev uint64
	var history []json.RawMessage // a conversation object's items
	object := ""                  // the conversation object's id
	if req.PreviousID != "" && known != nil && known.meta.ID == req.PreviousID {
		prev, headRev = known.meta, known.headRev
		target.ContinueFrom = known.continueFrom
	} else if req.PreviousID != "" {
		var err error
		if prev, err = s.store.Get(ctx, req.PreviousID); err != nil {
			return p, s.submitError(err)
		}
		if prev == nil || prev.Owner != owner {
			return p, responses.PreviousNotFound(req.PreviousID)
		}
		stage, pt, _, err := s.turnAt(ctx, prev.ConversationID, prev.TurnID)
		if err != nil {
			return p, s.submitError(err)
		}
		switch {
		case stage == "":
			return p, responses.PreviousNotFound(req.PreviousID) // its events are past retention
		case stage != contracts.StageCompleted:
			return p, responses.PreviousInProgress(req.PreviousID)
		}
		target.ContinueFrom = continuation(prev, pt)
	} else if req.Conversation != "" && !detached && strings.HasPrefix(req.Conversation, responses.ConversationPrefix) {
		// A conversation object: its items are the model's prior context,
		// sent whole with the turn, which runs in the Aptix conversation of
		// the same id (no scoping: the object's owner is checked instead).
		c, h, e := s.objectHistory(ctx, req.Conversation)
		if e != nil {
			return p, e
		}
		history = h
		target.ConversationID, object = c.ID, c.ID
		// The input joins the conversation: its ids must name it uniquely
		// (checked again, atomically, when it is added).
		input := responses.InputItems(respID, req.Input)
		if e := responses.CheckItemIDs("input", input); e != nil {
			return p, e
		}
		if taken := c.TakenID(input); taken != "" {
			return p, responses.DuplicateItem(taken)
		}
	} else if req.Conversation != "" && !detached {
		if !contracts.IsToken(req.Conversation) {
			return p, responses.BadRequest("conversation", responses.CodeInvalidValue,
				"Invalid 'conversation': must match [A-Za-z0-9_-]{1,128}.")
		}
		conv, ok := scopeConversation(owner, req.Conversation)
		if !ok {
			return p, responses.BadRequest("conversation", responses.CodeInvalidValue,
				fmt.Sprintf("Invalid 'conversation': at most %d characters for this caller.", contracts.MaxIDLen-scopeLen))
		}
		target.ConversationID = conv // the envelope continues its newest response
	}
	// Everything the client can get wrong is checked before a head moves.
	sent := req
	if object != "" {
		withHistory := *req
		withHistory.Input = append(append([]json.RawMessage{}, history...), req.Input...)
		sent = &withHistory
	}
	if p.exec, e = responses.ToExecute(sent, target); e != nil {
		return p, e
	}
	if object != "" {
		p.exec.OpenAI.WholeHistory = true
	}
	m, e := responses.MetaFor(req)
	if e != nil {
		return p, e
	}
	// A new conversation (or a branch) writes no head: its first response
	// is its head. A named conversation's head is written with every turn,
	// concurrently with the response record below: one store round trip on
	// the create's path instead of two.
	var headDone chan error
	if !detached && object == "" {
		same := false
		if prev != nil {
			var err error
			switch {
			case headRev != 0:
				same, p.headRev, err = s.store.ClaimHeadAt(ctx, prev.ConversationID, respID, headRev)
			case startsConversation(prev):
				same, p.headRev, err = s.store.claimFirst(ctx, prev.ConversationID, respID)
			default:
				same, p.headRev, err = s.store.claimHead(ctx, prev.ConversationID, prev.ID, respID)
			}
			if err != nil {
				return p, s.submitError(err)
			}
		}
		if same {
			target.ConversationID = prev.ConversationID
			p.exec.ConversationId = prev.ConversationID
		} else if prev == nil && req.Conversation != "" {
			headDone = make(chan error, 1)
			go func(conv string) {
				rev, err := s.store.setHead(ctx, conv, respID)
				p.headRev = rev
				headDone <- err
			}(target.ConversationID)
		}
	}
	// headSet waits for that head write; the record is only kept if both
	// writes succeeded.
	headSet := func() error {
		if headDone == nil {
			return nil
		}
		err := <-headDone
		headDone = nil
		return err
	}
	// A response that starts its conversation (a new one, or a branch) runs
	// in one named after its own turn, which nothing was recorded under:
	// the envelope skips reading the conversation's record.
	p.exec.NewConversation = p.exec.ConversationId == firstConversation(turnID)
	if prev != nil && p.exec.ConversationId != prev.ConversationID {
		// A branch continues a response of another conversation: recovery
		// finds the calls before the branch in that one's events.
		p.exec.ContinuationConversation = prev.ConversationID
	}
	p.exec.Principal, p.exec.Budgets, p.exec.KeyId = owner, budgets, keyID(ctx)
	meta := &m
	meta.ID, meta.ConversationID, meta.TurnID, meta.Owner = respID, target.ConversationID, turnID, owner
	meta.CreatedAt, meta.ContinuedFrom, meta.HistoryItems = s.cfg.Now().Unix(), target.ContinueFrom, len(history)
	if meta.Model == "" {
		if pr, err := s.cfg.Profiles.Get(backend); err == nil {
			meta.Model = pr.Model("")
		}
	}
	p.meta = meta
	// With store: false (OpenAI's) the response is answered, not kept, so
	// GET and previous_response_id do not find it.
	if !detached && req.Store {
		if err := s.store.Put(ctx, *meta); err != nil {
			_ = headSet()
			return prepared{}, s.submitError(err)
		}
	}
	if err := headSet(); err != nil {
		if !detached && req.Store {
			_ = s.store.Delete(ctx, meta.ID)
		}
		return prepared{}, s.submitError(err)
	}
	if object != "" {
		// Before the submit, so the conversation never misses a turn that
		// ran; a submit that fails withdraws it.
		input := responses.InputItems(respID, req.Input)
		if err := s.add(ctx, object, input, func(c *responses.Conversation) { c.AppendPending(*meta, input) }); err != nil {
			if req.Store {
				_ = s.store.Delete(ctx, meta.ID)
			}
			return prepared{}, s.convError(object, err)
		}
	}
	return p, nil
}

// serveEvents answers a stream:true create with Server-Sent Events (relay
// writes them). A client that goes away stops the writing, not the turn.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, meta *responses.Meta, deltas chan *nats.Msg, g *watchGen) {
	fl := beginSSE(w)
	// A conversation object gets the output before the terminal event goes out.
	settle := func(*responses.Response, *contracts.Turn) { s.settleAfter(context.WithoutCancel(r.Context()), meta) }
	final, _ := s.relay(r.Context(), meta, deltas, g, settle, func(evs []responses.Event) bool {
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err == nil {
				_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
			}
			if err != nil {
				return false
			}
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	})
	if final != nil { // the terminal event was written: end the stream
		writeDone(w, fl)
	}
}

// cancelOnHangup cancels meta's turn when r's client goes away, for a
// door whose clients have no id to come back for an answer with (Chat
// Completions, Messages); the returned stop ends the watch and must run
// before the handler returns, which ends r's context too.
func (s *Server) cancelOnHangup(r *http.Request, meta *responses.Meta) (stop func() bool) {
	return context.AfterFunc(r.Context(), func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if _, err := s.cancels.Cancel(cctx, meta.ConversationID, meta.TurnID); err != nil {
			s.log.Warn("cancelling the turn of a client that hung up failed", "path", r.URL.Path, "turn", meta.TurnID, "err", err)
		}
	})
}

// beginSSE starts an event stream answer, for every door that streams: no
// caching, no proxy buffering (nginx holds a stream otherwise), 200 sent.
// The flusher is nil when the writer cannot flush.
func beginSSE(w http.ResponseWriter) http.Flusher {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return fl
}

// writeDone ends an event stream after its terminal event with the literal
// "data: [DONE]" that Open Responses requires (docs/http-api.md); openai-go
// reads it as the end too. WebSocket mode has no such frame.
func writeDone(w io.Writer, fl http.Flusher) {
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// relay streams one response to a client, whatever the transport (SSE or
// WebSocket): created and in_progress at once, the live deltas as they
// come, then the done events and the terminal event built from the
// completion. emit writes events and reports false once the client is
// gone; relay then stops writing (also when client is done), not the turn:
// the completion is still claimed, so the shared watch does not keep it.
// onFinal, when set, sees the terminal response and the completed turn
// (nil after a timeout) before the terminal events are emitted. It returns
// the terminal response and the completed turn (both nil when the client
// went away first).
func (s *Server) relay(client context.Context, meta *responses.Meta, deltas chan *nats.Msg, g *watchGen,
	onFinal func(*responses.Response, *contracts.Turn), emit func([]responses.Event) bool) (*responses.Response, *contracts.Turn) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(client), s.cfg.SyncTimeout)
	done := make(chan contracts.Turn, 1)
	waitErr := make(chan error, 1)
	go func() {
		defer cancel()
		t, err := s.comps.wait(wctx, g, meta.ConversationID, meta.TurnID)
		if err != nil {
			waitErr <- err
			return
		}
		done <- t
	}()

	st := responses.NewStreamer()
	if !emit(append(st.Start(responses.Pending(*meta, responses.StatusInProgress)), st.FileSearch(*meta)...)) {
		return nil, nil
	}
	onDelta := func(m *nats.Msg) bool {
		var d responses.Delta
		if json.Unmarshal(m.Data, &d) == nil {
			if evs := st.Delta(d); len(evs) > 0 {
				return emit(evs)
			}
		}
		return true
	}
	for {
		select {
		case m := <-deltas:
			if !onDelta(m) {
				return nil, nil
			}
		case t := <-done:
			// Deltas published before the completion may still be queued.
			for drained := false; !drained; {
				select {
				case m := <-deltas:
					if !onDelta(m) {
						return nil, nil
					}
				default:
					drained = true
				}
			}
			final := responses.FromTurn(*meta, &t, s.cfg.Now().Unix())
			if onFinal != nil {
				onFinal(&final, &t)
			}
			if !emit(st.Finish(final)) {
				return nil, nil
			}
			return &final, &t
		case err := <-waitErr:
			failed := responses.Pending(*meta, responses.StatusFailed)
			failed.Error = &responses.ResponseError{Code: "timeout", Message: fmt.Sprintf("no completion within %s: %v; GET /v1/responses/%s later", s.cfg.SyncTimeout, err, meta.ID)}
			if onFinal != nil {
				onFinal(&failed, nil)
			}
			emit(st.Finish(failed))
			return &failed, nil
		case <-client.Done():
			// The waiting goroutine still claims the completion (its channels
			// are buffered), so the turn and the shared watch are unaffected.
			return nil, nil
		}
	}
}
