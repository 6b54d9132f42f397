package httpapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// readBody reads at most MaxBodyBytes; beyond it the client gets a 413.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *responses.Error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, responses.TooLarge(s.cfg.MaxBodyBytes)
	}
	if err != nil {
		return nil, responses.BadRequest("", "read_failed", "Reading the request body failed: "+err.Error())
	}
	return data, nil
}

// newIDs returns a turn id (UUIDv7, like every Aptix client) and the
// response id derived from it: Aptix's own resp_…, never the upstream's.
func newIDs() (turnID, responseID string) {
	u := uuid.Must(uuid.NewV7())
	return u.String(), "resp_" + hex.EncodeToString(u[:])
}

func newConversationID() string { return "c-" + uuid.Must(uuid.NewV7()).String() }

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
	// Deltas are core NATS, not stored: subscribe before the turn exists.
	var deltas chan *nats.Msg
	if req.Stream {
		deltas = make(chan *nats.Msg, 4096)
		sub, err := s.cfg.NC.ChanSubscribe(contracts.DeltaSubject(meta.ConversationID, meta.TurnID), deltas)
		if err != nil {
			if req.Store {
				_ = s.store.Delete(ctx, meta.ID)
			}
			s.fail(w, s.submitError(err))
			return
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	g := s.comps.acquire(ctx) // before the submit: the watch must predate the completion
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	err := pipeline.Submit(sctx, s.js, exec)
	cancel()
	if err != nil {
		s.comps.release(g)
		if req.Store {
			_ = s.store.Delete(ctx, meta.ID)
		}
		s.fail(w, s.submitError(err))
		return
	}
	if req.Stream {
		s.serveEvents(w, r, meta, deltas, g)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	t, err := s.comps.wait(wctx, g, meta.TurnID)
	if err != nil {
		s.fail(w, &responses.Error{Status: http.StatusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"),
			Message: fmt.Sprintf("Response %s is still running after %s; GET /v1/responses/%s returns it once it completes.", meta.ID, s.cfg.SyncTimeout, meta.ID)})
		return
	}
	if t.Failure != nil && t.Failure.Code == pipeline.CodeCancelled {
		// Cancelled by POST …/cancel while this request waited: the answer
		// is the cancelled response, as GET shows it, not an error.
		if resp, err := s.current(ctx, meta); err == nil {
			writeJSON(w, http.StatusOK, resp)
			return
		}
	}
	if fe := responses.Failure(&t); fe != nil {
		s.fail(w, fe) // the stored response is failed with this error (GET shows it)
		return
	}
	writeJSON(w, http.StatusOK, responses.FromTurn(*meta, &t, s.cfg.Now().Unix()))
}

func ptr(s string) *string { return &s }

// prepare resolves the backend, the conversation (new, continued, or a
// branch), records the response and builds the execute request.
//
// Branching: previous_response_id names a response P of conversation C. When
// P is C's head (its newest response), the new turn continues C and becomes
// its head (moved atomically, compare-and-set on the head's KV revision).
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
// The caller (the principal in ctx) owns the new response; another
// principal's previous_response_id answers as an unknown one, and a
// conversation named by an authenticated caller is scoped to it
// (scopeConversation), so callers never share one.
func (s *Server) prepare(ctx context.Context, req *responses.CreateRequest, detached bool, turnID, respID string) (*responses.Meta, contracts.AgentExecuteRequest, *responses.Error) {
	var exec contracts.AgentExecuteRequest
	backend, model, e := responses.Resolve(s.cfg.Profiles, req.Model)
	if e != nil {
		return nil, exec, e
	}
	owner := principal(ctx)
	target := responses.Target{TurnID: turnID, Backend: backend, Model: model, ConversationID: newConversationID()}
	var prev *responses.Meta
	if req.PreviousID != "" {
		var err error
		if prev, err = s.store.Get(ctx, req.PreviousID); err != nil {
			return nil, exec, s.submitError(err)
		}
		if prev == nil || prev.Owner != owner {
			return nil, exec, responses.PreviousNotFound(req.PreviousID)
		}
		stage, pt, _, err := s.turnAt(ctx, prev.ConversationID, prev.TurnID)
		if err != nil {
			return nil, exec, s.submitError(err)
		}
		switch {
		case stage == "":
			return nil, exec, responses.PreviousNotFound(req.PreviousID) // its events are past retention
		case stage != contracts.StageCompleted:
			return nil, exec, responses.PreviousInProgress(req.PreviousID)
		}
		target.ContinueFrom = prev.ContinuedFrom // a failed response has no upstream id: continue what it continued
		if pt.Response != nil && pt.Response.ResponseContinuationId != "" && responses.Failure(pt) == nil {
			target.ContinueFrom = pt.Response.ResponseContinuationId
		}
	} else if req.Conversation != "" && !detached {
		if !contracts.IsToken(req.Conversation) {
			return nil, exec, responses.BadRequest("conversation", responses.CodeInvalidValue,
				"Invalid 'conversation': must match [A-Za-z0-9_-]{1,128}.")
		}
		conv, ok := scopeConversation(owner, req.Conversation)
		if !ok {
			return nil, exec, responses.BadRequest("conversation", responses.CodeInvalidValue,
				fmt.Sprintf("Invalid 'conversation': at most %d characters for this caller.", contracts.MaxIDLen-scopeLen))
		}
		target.ConversationID = conv // the envelope continues its newest response
	}
	// Everything the client can get wrong is checked before a head moves.
	if exec, e = responses.ToExecute(req, target); e != nil {
		return nil, exec, e
	}
	m, e := responses.MetaFor(req)
	if e != nil {
		return nil, exec, e
	}
	if !detached {
		same := false
		if prev != nil {
			var err error
			if same, err = s.store.ClaimHead(ctx, prev.ConversationID, prev.ID, respID); err != nil {
				return nil, exec, s.submitError(err)
			}
		}
		if same {
			target.ConversationID = prev.ConversationID
			exec.ConversationId = prev.ConversationID
		} else if err := s.store.SetHead(ctx, target.ConversationID, respID); err != nil {
			return nil, exec, s.submitError(err)
		}
	}
	exec.Principal = owner
	meta := &m
	meta.ID, meta.ConversationID, meta.TurnID, meta.Owner = respID, target.ConversationID, turnID, owner
	meta.CreatedAt, meta.ContinuedFrom = s.cfg.Now().Unix(), target.ContinueFrom
	if meta.Model == "" {
		if p, err := s.cfg.Profiles.Get(backend); err == nil {
			meta.Model = p.Model("")
		}
	}
	if detached || !req.Store {
		// store: false (OpenAI's): the response is answered, not kept, so
		// GET and previous_response_id do not find it.
		return meta, exec, nil
	}
	if err := s.store.Put(ctx, *meta); err != nil {
		return nil, exec, s.submitError(err)
	}
	return meta, exec, nil
}

// serveEvents answers a stream:true create with Server-Sent Events: created and
// in_progress at once, the live deltas as they come, then the done events
// and the terminal event built from the completion. A client that goes away
// stops the writing, not the turn; the completion is still claimed so the
// shared watch does not keep it.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, meta *responses.Meta, deltas chan *nats.Msg, g *watchGen) {
	ctx := context.WithoutCancel(r.Context())
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	done := make(chan contracts.Turn, 1)
	waitErr := make(chan error, 1)
	go func() {
		defer cancel()
		t, err := s.comps.wait(wctx, g, meta.TurnID)
		if err != nil {
			waitErr <- err
			return
		}
		done <- t
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	gone := false
	write := func(evs []responses.Event) {
		for _, ev := range evs {
			if gone {
				return
			}
			b, err := json.Marshal(ev)
			if err == nil {
				_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
			}
			if err != nil {
				gone = true
				return
			}
		}
		if fl != nil {
			fl.Flush()
		}
	}
	st := responses.NewStreamer()
	write(st.Start(responses.Pending(*meta, responses.StatusInProgress)))
	onDelta := func(m *nats.Msg) {
		var d responses.Delta
		if json.Unmarshal(m.Data, &d) == nil {
			write(st.Delta(d))
		}
	}
	for {
		select {
		case m := <-deltas:
			onDelta(m)
		case t := <-done:
			// Deltas published before the completion may still be queued.
			for drained := false; !drained; {
				select {
				case m := <-deltas:
					onDelta(m)
				default:
					drained = true
				}
			}
			write(st.Finish(responses.FromTurn(*meta, &t, s.cfg.Now().Unix())))
			return
		case err := <-waitErr:
			failed := responses.Pending(*meta, responses.StatusFailed)
			failed.Error = &responses.ResponseError{Code: "timeout", Message: fmt.Sprintf("no completion within %s: %v; GET /v1/responses/%s later", s.cfg.SyncTimeout, err, meta.ID)}
			write(st.Finish(failed))
			return
		case <-r.Context().Done():
			// The waiting goroutine still claims the completion (its channels
			// are buffered), so the turn and the shared watch are unaffected.
			return
		}
	}
}
