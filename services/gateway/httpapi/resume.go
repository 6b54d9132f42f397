package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// streamStored writes a stored response's event stream
// (application.Resume) as Server-Sent Events, from sequence after+1 on
// (after -1: all of it).
func (s *Server) streamStored(w http.ResponseWriter, r *http.Request, meta *responses.Meta, after int) {
	var out *sse
	finished, e := s.app.Resume(r.Context(), meta, func(evs []responses.Event) {
		if out == nil {
			out = newSSE(w, after)
		}
		out.write(evs)
	})
	if e != nil && out == nil {
		s.fail(w, e)
		return
	}
	if finished {
		out.done()
	}
}

// sse writes Server-Sent Events, skipping those at or before a resume point.
type sse struct {
	w     http.ResponseWriter
	fl    http.Flusher
	after int
	gone  bool
}

func newSSE(w http.ResponseWriter, after int) *sse {
	return &sse{w: w, fl: beginSSE(w), after: after}
}

func (s *sse) write(evs []responses.Event) {
	for _, ev := range evs {
		if s.gone || ev.Seq <= s.after {
			continue
		}
		b, err := json.Marshal(ev)
		if err == nil {
			_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", ev.Type, b)
		}
		if err != nil {
			s.gone = true
		}
	}
	if s.fl != nil {
		s.fl.Flush()
	}
}

// done ends the stream, after its terminal event: "data: [DONE]".
func (s *sse) done() {
	if !s.gone {
		writeDone(s.w, s.fl)
	}
}

// resume is GET /v1/responses/{id}?stream=true[&starting_after=N].
func (s *Server) resume(w http.ResponseWriter, r *http.Request, meta *responses.Meta) {
	after := -1
	if v := r.URL.Query().Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, responses.BadRequest("starting_after", responses.CodeInvalidValue, "Invalid 'starting_after': expected a non-negative integer."))
			return
		}
		after = n
	}
	s.streamStored(w, r, meta, after)
}
