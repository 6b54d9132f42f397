package application

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

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

// OpenCompactions turns the gateway's compaction items among items back
// into the summaries they stand for; one that does not open for the
// caller is the client's 400.
func (a *App) OpenCompactions(who auth.Principal, items []json.RawMessage) ([]json.RawMessage, *responses.Error) {
	return responses.OpenCompactions(items, a.cfg.CompactionKeys, who.ID)
}

// CompactForward is the backend a compaction of req is forwarded to: one
// whose backend serves /responses/compact, for explicit input only (a
// previous_response_id names an Aptix response, whose upstream chain the
// pipeline knows how to replay; the backend alone does not). ok is false
// when the pipeline makes the summary instead (Compact).
func (a *App) CompactForward(req *responses.CreateRequest) (p profiles.Profile, model string, ok bool) {
	if req.PreviousID != "" || len(req.CompactedInput) == 0 || req.Aptix != nil {
		return p, "", false
	}
	backend, model, e := responses.Resolve(a.cfg.Profiles, req.Model)
	if e != nil {
		return p, "", false
	}
	p, err := a.cfg.Profiles.Get(backend)
	if err != nil || !p.Capabilities.Compact {
		return p, "", false
	}
	return p, p.Model(model), true
}

// Compact asks the model for a summary of the conversation (req's input
// items, or the chain up to its previous_response_id) through the
// pipeline, as a turn of its own that no chain continues (a detached
// turn: no head moves, no record is kept), and returns it as a compaction
// item, sealed for the caller, that the next request sends as input.
func (a *App) Compact(ctx context.Context, who auth.Principal, req *responses.CreateRequest) (responses.Compacted, *responses.Error) {
	var out responses.Compacted
	ctx = context.WithoutCancel(ctx)
	turnID, respID := newIDs()
	p, e := a.prepare(ctx, who, req, true, nil, turnID, respID)
	if e != nil {
		return out, e
	}
	meta := p.meta
	g := a.comps.acquire(ctx)
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SubmitTimeout)
	err := a.enter(sctx, p.exec)
	cancel()
	if err != nil {
		a.comps.release(g)
		return out, a.BusError(err)
	}
	wctx, cancel := context.WithTimeout(ctx, a.cfg.SyncTimeout)
	defer cancel()
	t, err := a.comps.wait(wctx, g, meta.ConversationID, meta.TurnID)
	if err != nil {
		return out, &responses.Error{Status: statusGatewayTimeout, Type: responses.TypeServer, Code: ptr("timeout"),
			Message: fmt.Sprintf("the compaction did not complete within %s", a.cfg.SyncTimeout)}
	}
	if fe := responses.Failure(&t); fe != nil {
		return out, fe
	}
	now := a.cfg.Now().Unix()
	return responses.Compaction(meta.ID, now, req.CompactedInput, responses.FromTurn(*meta, &t, now), a.cfg.CompactionKeys, who.ID), nil
}
