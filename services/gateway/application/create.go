package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Turn is a request to run a response: create it, or continue one. Every
// door that runs a model turn says its request as one (POST
// /v1/responses, a WebSocket response.create, Chat Completions, Messages).
type Turn struct {
	// Request is the create as the door decoded it.
	Request *responses.CreateRequest
	// Background runs the turn as a background response: admitted within
	// the caller's background limit, with its deadline armed, and followed
	// by nobody (Current answers it, Resume streams it).
	Background bool
	// Follow subscribes to the turn's live deltas (a streamed answer).
	Follow bool
	// Prior is the response the caller holds in memory, which Request may
	// continue (a WebSocket's previous response), or nil.
	Prior *Prior
	// Edit, when set, changes the turn before it is submitted: what only
	// the door knows of how the model is reached (a chat body forwarded as
	// sent, Anthropic's headers).
	Edit func(*contracts.AgentExecuteRequest)
}

// Run is a submitted turn a door follows: its response record, its live
// deltas (Follow) and the completion watch it waits on. Close it when done.
type Run struct {
	Meta *responses.Meta
	// headRev is the head revision the turn wrote (Prior).
	headRev uint64
	deltas  chan *nats.Msg
	sub     *nats.Subscription
	g       *watchGen
}

// Close stops following the turn's deltas.
func (r *Run) Close() {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}

// Prior is what a continuation of this run's response needs from memory,
// once it completed as t with the output's call ids.
func (r *Run) Prior(t *contracts.Turn, callIDs map[string]bool) *Prior {
	return &Prior{meta: r.Meta, continueFrom: continuation(r.Meta, t), headRev: r.headRev, callIDs: callIDs}
}

// Start creates a response and submits its turn: the backend and the
// conversation are resolved (a continuation moves its conversation's head,
// prepare.go), the record is kept (in the turn's events, and written
// while the turn is published when its id cannot find them: record.go),
// and the turn published. A background
// turn is answered as soon as it is queued; any other is followed: a
// streamed turn's deltas are subscribed and the completion watch taken
// before the turn exists, so neither can be missed. A submit that fails
// withdraws the prepared response.
//
// The turn runs on ctx detached from the caller: a client that goes away
// does not cancel it.
func (a *App) Start(ctx context.Context, who auth.Principal, t Turn) (*Run, *responses.Error) {
	ctx = context.WithoutCancel(ctx)
	turnID, respID := newIDs()
	req := t.Request
	if t.Background {
		if e := a.admitBackground(ctx, who.ID, respID); e != nil {
			return nil, e
		}
	}
	p, e := a.prepare(ctx, who, req, false, t.Prior, turnID, respID)
	if e != nil {
		return nil, e
	}
	if t.Edit != nil {
		t.Edit(&p.exec)
	}
	if t.Background {
		if e := a.submitBackground(ctx, p.meta, p.exec, p.recorded); e != nil {
			return nil, e
		}
		// Answered queued with its id: its record first.
		return &Run{Meta: p.meta}, a.recordAfterSubmit(ctx, p.meta, p.recorded)
	}
	run, e := a.submit(ctx, p.meta, p.exec, t.Follow, req.Store, p.recorded)
	if e != nil {
		return nil, e
	}
	// Nobody learns the id (the answer, a streamed response.created)
	// before the record can be read.
	if e := a.recordAfterSubmit(ctx, p.meta, p.recorded); e != nil {
		a.comps.release(run.g)
		run.Close()
		return nil, e
	}
	run.headRev = p.headRev
	return run, nil
}

// submit publishes a prepared turn and follows it. A submit that fails
// withdraws the response, once its record's write (recorded) is over.
func (a *App) submit(ctx context.Context, meta *responses.Meta, exec contracts.AgentExecuteRequest, follow, stored bool, recorded func() error) (*Run, *responses.Error) {
	run := &Run{Meta: meta}
	// Deltas are core NATS, not stored: subscribe before the turn exists.
	if follow {
		run.deltas = make(chan *nats.Msg, 4096)
		sub, err := a.cfg.NC.ChanSubscribe(contracts.DeltaSubject(meta.ConversationID, meta.TurnID), run.deltas)
		if err != nil {
			_ = recorded()
			a.withdraw(ctx, meta, stored)
			return nil, a.BusError(err)
		}
		run.sub = sub
	}
	run.g = a.comps.acquire(ctx) // before the submit: the watch must predate the completion
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SubmitTimeout)
	err := a.enter(sctx, exec)
	cancel()
	if err != nil {
		a.comps.release(run.g)
		run.Close()
		_ = recorded()
		a.withdraw(ctx, meta, stored)
		return nil, a.BusError(err)
	}
	return run, nil
}

// submitBackground publishes a background turn: nothing waits for it
// here, and nothing polls. The turn runs through the pipeline like any
// other, its status is derived from its events on each read, and its
// webhook (if any) is sent by the webhook consumer on its completion.
func (a *App) submitBackground(ctx context.Context, meta *responses.Meta, exec contracts.AgentExecuteRequest, recorded func() error) *responses.Error {
	// Armed before the turn exists: a response is never without its limit.
	if err := a.armDeadline(ctx, meta); err != nil {
		_ = recorded()
		a.withdraw(ctx, meta, true)
		return a.BusError(err)
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SubmitTimeout)
	err := a.enter(sctx, exec)
	cancel()
	if err != nil {
		_ = recorded()
		a.withdraw(ctx, meta, true)
		return a.BusError(err)
	}
	return nil
}

// Outcome waits for a followed turn and says what it answers: the
// response, or the error (a failed turn, a timeout, a lost bus), and the
// backend profile that served it once it completed (another than the one
// asked for when a fallback answered; "" when unknown).
func (a *App) Outcome(ctx context.Context, run *Run) (resp responses.Response, backend string, e *responses.Error) {
	meta := run.Meta
	wctx, cancel := context.WithTimeout(ctx, a.cfg.SyncTimeout)
	defer cancel()
	t, err := a.comps.wait(wctx, run.g, meta.ConversationID, meta.TurnID)
	if err == nil {
		a.settleAfter(ctx, meta)
		backend = servedBy(&t)
	}
	if errors.Is(err, client.ErrUnreadableCompletion) {
		return responses.Response{}, backend, &responses.Error{Status: statusInternal, Type: responses.TypeServer,
			Message: fmt.Sprintf("Response %s completed, but its result could not be read (%v); GET /v1/responses/%s may return it.", meta.ID, err, meta.ID)}
	}
	if err != nil && a.comps.stopped() {
		return responses.Response{}, backend, responses.Unavailable(fmt.Sprintf("The gateway lost its bus connection while response %s ran; it still completes, and GET /v1/responses/%s returns it.", meta.ID, meta.ID))
	}
	if err != nil {
		return responses.Response{}, backend, &responses.Error{Status: statusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"),
			Message: fmt.Sprintf("Response %s is still running after %s; GET /v1/responses/%s returns it once it completes.", meta.ID, a.cfg.SyncTimeout, meta.ID)}
	}
	if t.Failure != nil && t.Failure.Code == store.CodeCancelled {
		// Cancelled while this request waited: the answer is the cancelled
		// response, as Get shows it, not an error.
		if resp, err := a.current(ctx, meta); err == nil {
			return resp, backend, nil
		}
	}
	if t.Failure != nil && t.Failure.Code == contracts.LoopMaxDepthExceeded {
		// docs/http-api.md#server-side-mcp-tools: the response fails with an execution_error and keeps the
		// tool calls that ran, so it is the answer, not an error body.
		return responses.FromTurn(*meta, &t, a.cfg.Now().Unix()), backend, nil
	}
	if fe := responses.Failure(&t); fe != nil {
		return responses.Response{}, backend, fe // the stored response is failed with this error (Get shows it)
	}
	return responses.FromTurn(*meta, &t, a.cfg.Now().Unix()), backend, nil
}

// servedBy is the backend profile that served the completed turn t.
func servedBy(t *contracts.Turn) string {
	switch {
	case t == nil:
	case t.Response != nil && t.Response.Backend != "":
		return t.Response.Backend
	case t.LLM != nil && t.LLM.Backend != "":
		return t.LLM.Backend
	}
	return ""
}

// Relay streams a followed turn's response, whatever the transport (SSE
// or WebSocket): created and in_progress at once, the live deltas as they
// come, then the done events and the terminal event built from the
// completion. emit writes events and reports false once the client is
// gone; Relay then stops writing (also when client is done), not the turn:
// the completion is still claimed, so the shared watch does not keep it.
// A conversation object gets the output before the terminal event goes
// out. onFinal, when set, sees the terminal response and the completed
// turn (nil after a timeout) before the terminal events are emitted.
// Relay returns the terminal response and the completed turn (both nil
// when the client went away first).
func (a *App) Relay(client context.Context, run *Run, onFinal func(*responses.Response, *contracts.Turn), emit func([]responses.Event) bool) (*responses.Response, *contracts.Turn) {
	meta := run.Meta
	wctx, cancel := context.WithTimeout(context.WithoutCancel(client), a.cfg.SyncTimeout)
	done := make(chan contracts.Turn, 1)
	waitErr := make(chan error, 1)
	go func() {
		defer cancel()
		t, err := a.comps.wait(wctx, run.g, meta.ConversationID, meta.TurnID)
		if err != nil {
			waitErr <- err
			return
		}
		done <- t
	}()
	final := func(resp *responses.Response, t *contracts.Turn) {
		a.settleAfter(context.WithoutCancel(client), meta)
		if onFinal != nil {
			onFinal(resp, t)
		}
	}

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
		case m := <-run.deltas:
			if !onDelta(m) {
				return nil, nil
			}
		case t := <-done:
			// Deltas published before the completion may still be queued.
			for drained := false; !drained; {
				select {
				case m := <-run.deltas:
					if !onDelta(m) {
						return nil, nil
					}
				default:
					drained = true
				}
			}
			resp := responses.FromTurn(*meta, &t, a.cfg.Now().Unix())
			final(&resp, &t)
			if !emit(st.Finish(resp)) {
				return nil, nil
			}
			return &resp, &t
		case err := <-waitErr:
			failed := responses.Pending(*meta, responses.StatusFailed)
			failed.Error = &responses.ResponseError{Code: "timeout", Message: fmt.Sprintf("no completion within %s: %v; GET /v1/responses/%s later", a.cfg.SyncTimeout, err, meta.ID)}
			final(&failed, nil)
			emit(st.Finish(failed))
			return &failed, nil
		case <-client.Done():
			// The waiting goroutine still claims the completion (its channels
			// are buffered), so the turn and the shared watch are unaffected.
			return nil, nil
		}
	}
}

// CancelTurn cancels run's turn, for a door whose client hung up and has
// no id to come back for the answer with (Chat Completions, Messages).
func (a *App) CancelTurn(ctx context.Context, run *Run) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := a.cancels.Cancel(ctx, run.Meta.ConversationID, run.Meta.TurnID)
	return err
}
