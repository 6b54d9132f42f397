package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// The background limit (APTIX_LIMIT_BACKGROUND) is shared by every replica:
// KV aptix_responses key bg.<sha256(principal)> lists the principal's
// background responses that may still run. A create prunes the list (one
// status read per entry, at most the limit), refuses when it is still full,
// and adds its id with a compare-and-set on the key's revision.

type inflight struct {
	IDs []string `json:"ids"`
}

func bgKey(p string) string {
	h := sha256.Sum256([]byte(p))
	return "bg." + hex.EncodeToString(h[:16])
}

// admitBackground reserves a background slot for id, or answers the 429
// when the principal has APTIX_LIMIT_BACKGROUND responses queued or
// running (the 503 when the store cannot say).
func (a *App) admitBackground(ctx context.Context, p, id string) *responses.Error {
	ok, err := a.reserveBackground(ctx, p, id)
	if err != nil {
		return a.BusError(err)
	}
	if !ok {
		return &responses.Error{Status: statusTooManyRequests, Type: "requests", Code: ptr("rate_limit_exceeded"), RetryAfter: 5,
			Message: fmt.Sprintf("Too many background responses in flight: at most %d queued or running per caller. Retry when one ends.", a.cfg.LimitBackground)}
	}
	return nil
}

// reserveBackground reserves a background slot for id, or reports false
// when the principal has no slot left.
func (a *App) reserveBackground(ctx context.Context, p, id string) (bool, error) {
	if a.cfg.LimitBackground <= 0 {
		return true, nil
	}
	key := bgKey(p)
	for attempt := 0; attempt < 5; attempt++ {
		var cur inflight
		var rev uint64
		e, err := a.store.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, err
		default:
			rev = e.Revision()
			_ = json.Unmarshal(e.Value(), &cur)
		}
		live := cur.IDs[:0:0]
		for _, rid := range cur.IDs {
			meta, err := a.lookup(ctx, rid)
			if err != nil {
				return false, err
			}
			if meta == nil {
				continue // deleted (cancelled first)
			}
			st, err := a.state(ctx, meta)
			if err != nil {
				return false, err
			}
			if !responses.Terminal(responses.Current(*meta, st).Status) {
				live = append(live, rid)
			}
		}
		if len(live) >= a.cfg.LimitBackground {
			return false, nil
		}
		b, _ := json.Marshal(inflight{IDs: append(live, id)})
		if rev == 0 {
			_, err = a.store.kv.Create(ctx, key, b)
		} else {
			_, err = a.store.kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return true, nil
		}
		var apiErr *jetstream.APIError
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &apiErr) &&
			(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
			return false, err
		}
		// Another create of this principal won the race: read again.
	}
	return false, errors.New("background slots: too much contention")
}

// scopeLen is the length of the prefix scopeConversation adds.
const scopeLen = 14

// scopeConversation maps a conversation id a client names (the
// conversation parameter, /v1/aptix/execute's conversationId) into the
// caller's own namespace: "u<12 hex of sha256(principal)>-<id>". Two
// principals naming "support" get two conversations, so one can never
// continue, or learn of, the other's; an id already in the caller's
// namespace (as the execute endpoint answers it) is kept. Without
// authentication (principal "") ids are used as given. ok is false when
// the scoped id would be longer than an id may be.
func scopeConversation(p, conv string) (string, bool) {
	if p == "" {
		return conv, true
	}
	h := sha256.Sum256([]byte(p))
	prefix := "u" + hex.EncodeToString(h[:])[:12] + "-"
	if strings.HasPrefix(conv, prefix) {
		return conv, true
	}
	if len(prefix)+len(conv) > contracts.MaxIDLen {
		return "", false
	}
	return prefix + conv, true
}
