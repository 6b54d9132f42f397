package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// create is POST /v1/responses: the create decoded, run by the
// application (application.Start), answered whole (application.Outcome),
// as Server-Sent Events (application.Relay), or, for a background
// response, at once (queued) or as its stored stream (resume.go).
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
	// A client that goes away does not cancel its turn: it runs on a
	// context detached from the request.
	ctx := context.WithoutCancel(r.Context())
	run, e := s.app.Start(ctx, auth.From(ctx), application.Turn{Request: req, Background: req.Background, Follow: req.Stream})
	if e != nil {
		s.fail(w, e)
		return
	}
	if req.Background {
		if req.Stream {
			s.streamStored(w, r, run.Meta, -1)
			return
		}
		writeJSON(w, http.StatusOK, application.Queued(run.Meta))
		return
	}
	defer run.Close()
	if req.Stream {
		s.serveEvents(w, r, run)
		return
	}
	resp, backend, e := s.app.Outcome(ctx, run)
	setBackend(w, backend)
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// serveEvents answers a stream:true create with Server-Sent Events
// (application.Relay makes them). A client that goes away stops the
// writing, not the turn.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, run *application.Run) {
	fl := beginSSE(w)
	final, _ := s.app.Relay(r.Context(), run, nil, func(evs []responses.Event) bool {
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

// cancelOnHangup cancels run's turn when r's client goes away, for a
// door whose clients have no id to come back for an answer with (Chat
// Completions, Messages); the returned stop ends the watch and must run
// before the handler returns, which ends r's context too.
func (s *Server) cancelOnHangup(r *http.Request, run *application.Run) (stop func() bool) {
	return context.AfterFunc(r.Context(), func() {
		if err := s.app.CancelTurn(r.Context(), run); err != nil {
			s.log.Warn("cancelling the turn of a client that hung up failed", "path", r.URL.Path, "turn", run.Meta.TurnID, "err", err)
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
