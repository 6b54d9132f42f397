package application

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Execution is a submitted execute request (the seed's own shapes, POST
// /v1/aptix/execute): the turn, its deltas when streamed, and its answer
// when a re-send found it stored. Close it when done.
type Execution struct {
	Request  contracts.AgentExecuteRequest
	deltas   chan *nats.Msg
	sub      *nats.Subscription
	g        *watchGen
	wctx     context.Context
	cancel   context.CancelFunc
	stored   contracts.Turn
	answered bool
}

// Close stops following the execution.
func (x *Execution) Close() {
	x.cancel()
	if x.sub != nil {
		_ = x.sub.Unsubscribe()
	}
}

// Execute submits req as the caller's turn (conversationId and turnId
// generated when absent; a named conversation scoped to the caller; the
// caller's principal, key and budgets set on it) and follows it, its
// deltas too with stream. A re-send of a turn that already completed (a
// client retry after a lost answer) completes nothing again: its stored
// answer is the answer.
func (a *App) Execute(ctx context.Context, who auth.Principal, req contracts.AgentExecuteRequest, stream bool) (*Execution, *responses.Error) {
	turnID, _ := newIDs()
	// Only a turn id the client chose can name a turn sent before.
	named := req.TurnId != ""
	if req.TurnId == "" {
		req.TurnId = turnID
	} else if req.ConversationId == "" {
		// A client's turn id alone names the turn: a re-send of it is the
		// same turn (contracts.TurnConversation), scoped below like a named
		// conversation so two callers' turn ids never meet.
		req.ConversationId = contracts.TurnConversation(req.TurnId)
	}
	if req.ConversationId == "" {
		req.ConversationId = newConversationID()
	} else if conv, ok := scopeConversation(who.ID, req.ConversationId); ok {
		// An authenticated caller's conversations are its own (scopeConversation).
		req.ConversationId = conv
	} else {
		return nil, responses.BadRequest("conversationId", responses.CodeInvalidValue,
			fmt.Sprintf("conversationId: at most %d characters for this caller.", contracts.MaxIDLen-scopeLen))
	}
	// The turn carries who asked for it; a client cannot name someone else,
	// nor make its turn read as another's response (record.go).
	req.Principal, req.GatewayRecord = who.ID, nil
	budgets, e := a.checkBudgets(ctx, who)
	if e != nil {
		return nil, e
	}
	req.Budgets, req.KeyId = budgets, who.KeyID
	req.Stream = req.Stream || stream
	if err := req.Validate(); err != nil {
		return nil, responses.BadRequest("", responses.CodeInvalidValue, err.Error())
	}
	ctx = context.WithoutCancel(ctx)
	x := &Execution{Request: req}
	if stream {
		x.deltas = make(chan *nats.Msg, 4096)
		sub, err := a.cfg.NC.ChanSubscribe(contracts.DeltaSubject(req.ConversationId, req.TurnId), x.deltas)
		if err != nil {
			return nil, a.BusError(err)
		}
		x.sub = sub
	}
	x.g = a.comps.acquire(ctx)
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SubmitTimeout)
	err := a.enter(sctx, req)
	cancel()
	if err != nil {
		a.comps.release(x.g)
		if x.sub != nil {
			_ = x.sub.Unsubscribe()
		}
		return nil, a.BusError(err)
	}
	x.wctx, x.cancel = context.WithTimeout(ctx, a.cfg.SyncTimeout)
	if named {
		x.stored, x.answered, err = client.Answered(x.wctx, a.js, req)
	}
	if err != nil {
		a.log.Warn("execute: looking up a stored answer failed; waiting for a completion", "conversation", req.ConversationId, "turn", req.TurnId, "err", err)
	}
	if x.answered {
		a.comps.release(x.g)
	}
	return x, nil
}

// ExecutionResult waits for x's completion: its answer and the backend
// that served it, or the error (a timeout, a budget refusal).
func (a *App) ExecutionResult(x *Execution) (*contracts.AgentExecuteResponse, string, *responses.Error) {
	t, err := x.stored, error(nil)
	if !x.answered {
		t, err = a.comps.wait(x.wctx, x.g, x.Request.ConversationId, x.Request.TurnId)
	}
	if err != nil {
		return nil, "", &responses.Error{Status: statusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"), Message: err.Error()}
	}
	if e := budgetFailure(t.Response); e != nil {
		return nil, "", e
	}
	return t.Response, servedBy(&t), nil
}

// FollowExecution hands each of a streamed x's deltas to onDelta as they
// come, until its completion: the completed turn, or nil when none came in
// time. ended is false when client ended first.
func (a *App) FollowExecution(client context.Context, x *Execution, onDelta func([]byte)) (t *contracts.Turn, ended bool) {
	done := make(chan contracts.Turn, 1)
	if x.answered {
		done <- x.stored
	} else {
		go func() {
			if t, err := a.comps.wait(x.wctx, x.g, x.Request.ConversationId, x.Request.TurnId); err == nil {
				done <- t
			} else {
				close(done)
			}
		}()
	}
	for {
		select {
		case m := <-x.deltas:
			onDelta(m.Data)
		case t, ok := <-done:
			for drained := false; !drained; {
				select {
				case m := <-x.deltas:
					onDelta(m.Data)
				default:
					drained = true
				}
			}
			if !ok {
				return nil, true
			}
			return &t, true
		case <-client.Done():
			return nil, false
		}
	}
}
