// Package claim is the claim check of the pipeline's events: an event too big
// for one NATS message is stored in an object store and travels as a stub.
package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Claim check: a turn's event can outgrow the connection's max
// payload (1 MiB by default) within the documented request limits: 512 KiB
// of tools appear in the request, again in the /responses body, and a large
// upstream response fills the responded event's LLM section and the
// completion's rawResponseJson (and, under tool emulation, its rewrite too).
// An event above the threshold is stored whole in the aptix_events object
// store, and the message carries only a stub plus the aptix-claim header
// naming the object; every reader (stages, Await, Completions, `aptix
// events`) resolves it through EventData. The objects expire with history.

// headroom leaves room under the max payload for headers.
const headroom = 64 << 10

// Store is the lazily opened object store.
type Store struct {
	js  jetstream.JetStream
	ttl time.Duration

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

// NewStore is the claim store on js, its objects expiring after ttl (with
// history).
func NewStore(js jetstream.JetStream, ttl time.Duration) *Store {
	return &Store{js: js, ttl: ttl}
}

// Open creates the store on first use. A failure is not remembered (the
// first caller's context may have been cancelled, or the server briefly
// unreachable): the next big event tries again.
func (c *Store) Open(ctx context.Context) (jetstream.ObjectStore, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.obs != nil {
		return c.obs, nil
	}
	obs, err := c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: contracts.ClaimBucket, Description: "Aptix: events too big for a NATS message (claim check)",
		TTL: c.ttl, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", contracts.ClaimBucket, err)
	}
	c.obs = obs
	return obs, nil
}

// Threshold is the largest payload published inline on nc.
func Threshold(nc *nats.Conn) int {
	max := int(nc.MaxPayload())
	if max <= 0 {
		max = 1 << 20
	}
	return max - headroom
}

// Key names an event's object: one per turn and stage (and round),
// so a re-published event overwrites its own copy.
func Key(subject, msgID string) string { return msgID + "@" + subject }

// Stub is the payload of a claimed event: enough to route and log it.
func Stub(conv, turnID, key string, size int) []byte {
	return fmt.Appendf(nil, `{"conversationId":%q,"turnId":%q,"claim":%q,"size":%d}`, conv, turnID, key, size)
}

// EventData returns an event's payload, fetching it from the claim store
// when the message carries only a stub.
func EventData(ctx context.Context, js jetstream.JetStream, header nats.Header, data []byte) ([]byte, error) {
	key := header.Get(contracts.HeaderClaim)
	if key == "" {
		return data, nil
	}
	obs, err := js.ObjectStore(ctx, contracts.ClaimBucket)
	if err != nil {
		return nil, fmt.Errorf("claimed event %s: %w", key, err)
	}
	full, err := obs.GetBytes(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("claimed event %s has expired from %s", key, contracts.ClaimBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("claimed event %s: %w", key, err)
	}
	return full, nil
}
