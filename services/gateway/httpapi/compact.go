package httpapi

import (
	"context"
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// compact is POST /v1/responses/compact: Aptix asks the model for a summary
// of the conversation (the input items, or the chain up to
// previous_response_id) through the pipeline, as a turn of its own that no
// chain continues, and returns it as a compaction item the next request
// sends as input. Explicit input on a backend with the compact capability
// goes to that backend's own /responses/compact (application.ForwardCompact).
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	req, e := responses.ParseCompact(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	// An earlier Aptix compaction in the input is opened here too, for a
	// backend's compaction endpoint, which cannot read it; the echo of the
	// input keeps it sealed.
	opened, e := s.app.OpenCompactions(auth.From(r.Context()), req.CompactedInput)
	if e != nil {
		s.fail(w, e)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	if p, model, ok := s.app.CompactForward(req); ok {
		f, e := s.app.ForwardCompact(ctx, p, model, req, opened)
		if e != nil {
			s.fail(w, e)
			return
		}
		writeForwarded(w, f)
		return
	}
	out, e := s.app.Compact(ctx, auth.From(ctx), req)
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
