package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// get is GET /v1/responses/{id} (application.Get); with stream=true, a
// background response's stored event stream (resume.go).
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	ctx, who := r.Context(), auth.From(r.Context())
	if r.URL.Query().Get("stream") == "true" {
		meta, e := s.app.Record(ctx, who, r.PathValue("id"))
		if e != nil {
			s.fail(w, e)
			return
		}
		if !meta.Background {
			s.fail(w, responses.BadRequest("stream", responses.CodeInvalidValue, "Only a background response can be streamed again (create it with background: true)."))
			return
		}
		s.resume(w, r, meta)
		return
	}
	resp, e := s.app.Get(ctx, who, r.PathValue("id"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// cancel is POST /v1/responses/{id}/cancel (application.Cancel).
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	resp, e := s.app.Cancel(r.Context(), auth.From(r.Context()), r.PathValue("id"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// delete is DELETE /v1/responses/{id} (application.Delete).
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	d, e := s.app.Delete(r.Context(), auth.From(r.Context()), r.PathValue("id"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// inputItems is GET /v1/responses/{id}/input_items (application.InputItems),
// paged with limit/order/after.
func (s *Server) inputItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	list, e := s.app.InputItems(r.Context(), auth.From(r.Context()), r.PathValue("id"),
		application.Page{Limit: q.Get("limit"), Order: q.Get("order"), After: q.Get("after")})
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, list)
}
