package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// usageReport answers GET /v1/aptix/usage: the caller's own totals, or for
// an admin (any caller when authentication is off) every principal's,
// optionally one principal's (principal=); model= and from=/to= (UTC
// dates, YYYY-MM-DD, inclusive) narrow both.
func (s *Server) usageReport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := auth.From(r.Context())
	rep, e := s.app.Usage(r.Context(), p, application.UsageQuery{Principal: q.Get("principal"), Model: q.Get("model"),
		From: q.Get("from"), To: q.Get("to"), Admin: s.cfg.Auth == nil || p.Has(auth.RoleAdmin)})
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
