package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// compact is POST /v1/responses/compact: Aptix asks the model for a summary
// of the conversation (the input items, or the chain up to
// previous_response_id) through the pipeline, as a turn of its own that no
// chain continues, and returns it as a compaction item the next request
// sends as input. Explicit input on a backend with the compact capability
// goes to that backend's own /responses/compact (compactforward.go).
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
	ctx := context.WithoutCancel(r.Context())
	if p, model, ok := s.compactProfile(req); ok {
		s.forwardCompact(ctx, w, p, model, req)
		return
	}
	turnID, respID := newIDs()
	meta, exec, e := s.prepare(ctx, req, true, turnID, respID)
	if e != nil {
		s.fail(w, e)
		return
	}
	g := s.comps.acquire(ctx)
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	err := pipeline.Submit(sctx, s.js, exec)
	cancel()
	if err != nil {
		s.comps.release(g)
		s.fail(w, s.submitError(err))
		return
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	t, err := s.comps.wait(wctx, g, meta.ConversationID, meta.TurnID)
	if err != nil {
		s.fail(w, &responses.Error{Status: http.StatusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"),
			Message: fmt.Sprintf("the compaction did not complete within %s", s.cfg.SyncTimeout)})
		return
	}
	if fe := responses.Failure(&t); fe != nil {
		s.fail(w, fe)
		return
	}
	now := s.cfg.Now().Unix()
	writeJSON(w, http.StatusOK, responses.Compaction(meta.ID, now, req.CompactedInput, responses.FromTurn(*meta, &t, now)))
}
