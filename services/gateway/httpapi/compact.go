package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aptix-dev/aptix/pkg/sealbox"

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
	// An earlier Aptix compaction in the input is opened here too, for a
	// backend's compaction endpoint, which cannot read it; the echo of the
	// input keeps it sealed.
	opened, e := responses.OpenCompactions(req.CompactedInput, s.cfg.CompactionKeys, principal(r.Context()))
	if e != nil {
		s.fail(w, e)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	if p, model, ok := s.compactProfile(req); ok {
		s.forwardCompact(ctx, w, p, model, req, opened)
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
	err := s.enter(sctx, exec)
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
	writeJSON(w, http.StatusOK, responses.Compaction(meta.ID, now, req.CompactedInput, responses.FromTurn(*meta, &t, now), s.cfg.CompactionKeys, principal(ctx)))
}

// EnvCompactionKeys names the compaction keys: comma-separated base64
// 32-byte keys, the first sealing new items, every one opening old ones.
const EnvCompactionKeys = "APTIX_COMPACTION_KEYS"

// CompactionKeysFromEnv reads EnvCompactionKeys; nil when it is unset.
func CompactionKeysFromEnv() (*sealbox.Keyring, error) {
	v := os.Getenv(EnvCompactionKeys)
	if v == "" {
		return nil, nil
	}
	k, err := sealbox.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCompactionKeys, err)
	}
	return k, nil
}
