package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ResultsBucket keeps every finished server-side tool call, keyed by
// conversation, turn, round and call id: recorded before the round is
// published, so a round redelivered after a crash never runs a finished
// tool again.
const ResultsBucket = "aptix_tool_results"

// ResultStore records finished tool calls.
type ResultStore interface {
	Get(ctx context.Context, key string) (*contracts.ToolExecution, error)
	Put(ctx context.Context, key string, e contracts.ToolExecution) error
}

// ResultKey names one call of one round of one turn:
// "<conversationId>.<turnId>.<round>.<callId>" (contracts.TurnKey), so
// another conversation's turn of the same id never reads this one's results.
func ResultKey(conv, turnID string, round int, callID string) string {
	if !contracts.IsToken(callID) {
		sum := sha256.Sum256([]byte(callID))
		callID = hex.EncodeToString(sum[:12])
	}
	return contracts.TurnKey(conv, turnID) + "." + strconv.Itoa(round) + "." + callID
}

// OpenResults creates (idempotently) the results bucket.
func OpenResults(ctx context.Context, js jetstream.JetStream, replicas int) (ResultStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ResultsBucket, Description: "aptix: finished server-side tool calls per turn, round and call (run once)",
		History: 1, TTL: 7 * 24 * time.Hour, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("create KV bucket %s: %w", ResultsBucket, err)
	}
	return kvResults{kv}, nil
}

type kvResults struct{ kv jetstream.KeyValue }

func (s kvResults) Get(ctx context.Context, key string) (*contracts.ToolExecution, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tool result %s: %w", key, err)
	}
	var x contracts.ToolExecution
	if err := json.Unmarshal(e.Value(), &x); err != nil {
		return nil, fmt.Errorf("decode tool result %s: %w", key, err)
	}
	return &x, nil
}

func (s kvResults) Put(ctx context.Context, key string, x contracts.ToolExecution) error {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Errorf("encode tool result %s: %w", key, err)
	}
	if _, err := s.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("record tool result %s: %w", key, err)
	}
	return nil
}
