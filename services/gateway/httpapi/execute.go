package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// execute is POST /v1/aptix/execute: the seed's own shapes without NATS. An
// AgentExecuteRequest in (conversationId and turnId generated when absent),
// the AgentExecuteResponse out; with ?stream=true, SSE `delta` events (the
// LLM caller's deltas as they are) then one `response` event.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	var req contracts.AgentExecuteRequest
	if err := json.Unmarshal(data, &req); err != nil {
		_, pe := responses.Parse(data) // the same position-naming message as /v1/responses
		if pe == nil {
			pe = responses.BadRequest("", responses.CodeInvalidJSON, err.Error())
		}
		s.fail(w, pe)
		return
	}
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
	} else if conv, ok := scopeConversation(principal(r.Context()), req.ConversationId); ok {
		// An authenticated caller's conversations are its own (scopeConversation).
		req.ConversationId = conv
	} else {
		s.fail(w, responses.BadRequest("conversationId", responses.CodeInvalidValue,
			fmt.Sprintf("conversationId: at most %d characters for this caller.", contracts.MaxIDLen-scopeLen)))
		return
	}
	// The turn carries who asked for it; a client cannot name someone else.
	req.Principal = principal(r.Context())
	budgets, e := s.checkBudgets(r.Context())
	if e != nil {
		s.fail(w, e)
		return
	}
	req.Budgets, req.KeyId = budgets, keyID(r.Context())
	stream := r.URL.Query().Get("stream") == "true"
	req.Stream = req.Stream || stream
	if err := req.Validate(); err != nil {
		s.fail(w, responses.BadRequest("", responses.CodeInvalidValue, err.Error()))
		return
	}
	ctx := context.WithoutCancel(r.Context())
	var deltas chan *nats.Msg
	if stream {
		deltas = make(chan *nats.Msg, 4096)
		sub, err := s.cfg.NC.ChanSubscribe(contracts.DeltaSubject(req.ConversationId, req.TurnId), deltas)
		if err != nil {
			s.fail(w, s.submitError(err))
			return
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	g := s.comps.acquire(ctx)
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	err := s.enter(sctx, req)
	cancel()
	if err != nil {
		s.comps.release(g)
		s.fail(w, s.submitError(err))
		return
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	// A re-send of a turn that already completed (a client retry after a
	// lost answer) completes nothing again: its stored answer is the
	// answer. One still running is answered by the watch, as the first.
	var stored contracts.Turn
	answered := false
	if named {
		stored, answered, err = client.Answered(wctx, s.js, req)
	}
	if err != nil {
		s.log.Warn("execute: looking up a stored answer failed; waiting for a completion", "conversation", req.ConversationId, "turn", req.TurnId, "err", err)
	}
	if answered {
		s.comps.release(g)
	}
	if !stream {
		t, err := stored, error(nil)
		if !answered {
			t, err = s.comps.wait(wctx, g, req.ConversationId, req.TurnId)
		}
		if err != nil {
			s.fail(w, &responses.Error{Status: http.StatusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"), Message: err.Error()})
			return
		}
		if e := budgetFailure(t.Response); e != nil {
			s.fail(w, e)
			return
		}
		setBackend(w, &t)
		writeJSON(w, http.StatusOK, t.Response)
		return
	}
	done := make(chan contracts.Turn, 1)
	if answered {
		done <- stored
	} else {
		go func() {
			if t, err := s.comps.wait(wctx, g, req.ConversationId, req.TurnId); err == nil {
				done <- t
			} else {
				close(done)
			}
		}()
	}
	fl := beginSSE(w)
	send := func(event string, data []byte) {
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		if fl != nil {
			fl.Flush()
		}
	}
	for {
		select {
		case m := <-deltas:
			send("delta", m.Data)
		case t, ok := <-done:
			for drained := false; !drained; {
				select {
				case m := <-deltas:
					send("delta", m.Data)
				default:
					drained = true
				}
			}
			if !ok {
				send("error", []byte(`{"error":{"message":"no completion in time","type":"server_error","param":null,"code":"timeout"}}`))
				return
			}
			b, _ := json.Marshal(t.Response)
			send("response", b)
			return
		case <-r.Context().Done():
			return
		}
	}
}
