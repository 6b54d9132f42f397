package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// inputTokens is POST /v1/responses/input_tokens (application.CountInput):
// counted here, or by the backend's own endpoint (application.ForwardCount), whose
// answer is relayed as it is.
func (s *Server) inputTokens(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	req, e := responses.ParseCount(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	if v := req.IgnoredValue(); v != "" {
		w.Header().Set(responses.IgnoredHeader, v)
	}
	c, e := s.app.CountInput(r.Context(), auth.From(r.Context()), req)
	if e != nil {
		s.fail(w, e)
		return
	}
	if c.Forward {
		f, e := s.app.ForwardCount(r.Context(), c, req)
		if e != nil {
			s.fail(w, e)
			return
		}
		writeForwarded(w, f)
		return
	}
	writeJSON(w, http.StatusOK, responses.NewInputTokens(c.Tokens))
}
