package httpapi

import (
	"context"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// createBackground answers a background create as soon as the
// turn is in the queue: status queued, with queued_at. Nothing waits for it
// here, and nothing polls: the turn runs through the pipeline like any
// other, its status is derived from its events on each read, and its
// webhook (if any) is sent by the webhook consumer on its completion. With
// stream true the client reads the stored event stream instead
// (resume.go), from response.queued on.
func (s *Server) createBackground(w http.ResponseWriter, r *http.Request, req *responses.CreateRequest, meta *responses.Meta, exec contracts.AgentExecuteRequest) {
	ctx := context.WithoutCancel(r.Context())
	// Armed before the turn exists: a response is never without its limit.
	if err := s.armDeadline(ctx, meta); err != nil {
		s.withdraw(ctx, meta, true)
		s.fail(w, s.submitError(err))
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.SubmitTimeout)
	err := s.enter(sctx, exec)
	cancel()
	if err != nil {
		s.withdraw(ctx, meta, true)
		s.fail(w, s.submitError(err))
		return
	}
	if req.Stream {
		s.streamStored(w, r, meta, -1)
		return
	}
	writeJSON(w, http.StatusOK, responses.Current(*meta, responses.State{}))
}
