package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/chat"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// chatCompletions is POST /v1/chat/completions (docs/http-api.md#chat-completions):
// the chat request said as a Responses create (chat.Parse) runs as one
// turn through the same path as POST /v1/responses (prepare, submit,
// outcome or relay), so it is the same durable turn, paid once, within
// the caller's budgets, in the console and replayable. It keeps no
// response record (the client carries its history) and starts a
// conversation of its own. Unlike a Responses create, a client that hangs
// up cancels its turn: a chat client has no id to come back for it with.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	creq, e := chat.Parse(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	req, e := responses.Parse(creq.Create)
	if e != nil {
		s.fail(w, e)
		return
	}
	forward := s.chatRouting(w, creq, req)
	ctx := context.WithoutCancel(r.Context())
	run, e := s.app.Start(ctx, auth.From(ctx), application.Turn{Request: req, Follow: req.Stream,
		Edit: func(exec *contracts.AgentExecuteRequest) {
			if forward && exec.OpenAI != nil {
				exec.OpenAI.Chat = creq.Body
			}
		}})
	if e != nil {
		s.fail(w, e)
		return
	}
	defer run.Close()
	defer s.cancelOnHangup(r, run)() // before the handler returns, which ends r's context too
	if creq.Stream {
		s.serveChatEvents(w, r, run, creq.IncludeUsage)
		return
	}
	resp, backend, e := s.app.Outcome(ctx, run)
	setBackend(w, backend)
	if e == nil {
		e = chat.Failed(resp)
	}
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, chat.FromResponse(resp))
}

// chatRouting decides how the request reaches its backend, and names in
// X-Aptix-Ignored-Params what will not take effect there. A Chat
// Completions backend gets the client's body as sent (forward), unless
// its profile emulates tools in the prompt, which rewrites the request:
// then the translation goes, with the chat-only parameters (stop, seed, …)
// added to it, which the backend's translation passes on. A Responses
// backend has no place for the chat-only parameters: they are named.
func (s *Server) chatRouting(w http.ResponseWriter, creq *chat.Request, req *responses.CreateRequest) (forward bool) {
	if backend, _, e := responses.Resolve(s.cfg.Profiles, req.Model); e == nil {
		if p, err := s.cfg.Profiles.Get(backend); err == nil && p.API == profiles.APIChatCompletions {
			if p.Capabilities.ToolMode != profiles.ToolModePrompt {
				return true
			}
			for k, v := range creq.ChatOnly {
				req.Fields[k] = v
			}
			req.Ignore(req.ChatDropped(p.ContextWindow)...)
			req.Ignore(creq.Unsent...)
		} else {
			req.Ignore(creq.IgnoredOnResponses()...)
		}
	}
	if v := req.IgnoredValue(); v != "" {
		w.Header().Set(responses.IgnoredHeader, v)
	}
	return false
}

// serveChatEvents answers a streamed chat request with chat.completion.chunk
// events: the response's Responses events (relay) said as chunks, then
// data: [DONE]. A client that goes away stops the writing; the turn is
// cancelled by the caller.
func (s *Server) serveChatEvents(w http.ResponseWriter, r *http.Request, run *application.Run, includeUsage bool) {
	meta := run.Meta
	fl := beginSSE(w)
	cs := chat.NewStreamer(meta.ID, meta.Model, meta.CreatedAt, includeUsage)
	write := func(v any) bool {
		b, err := json.Marshal(v)
		if err == nil {
			_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		}
		return err == nil
	}
	if !write(cs.Start()) {
		return
	}
	final, _ := s.app.Relay(r.Context(), run, nil, func(evs []responses.Event) bool {
		out, _ := cs.Events(evs)
		for _, c := range out {
			if !write(c) {
				return false
			}
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	})
	if final != nil {
		writeDone(w, fl)
	}
}
