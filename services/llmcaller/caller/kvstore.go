package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Bucket names and retention of the JetStream stores.
const (
	// ResultsBucket is the KV bucket of final LLM results, keyed by the
	// call's key (Input.TurnID: conversation, turn and round).
	ResultsBucket = "aptix_llm_results"
	// HistoryBucket is the object store of conversation items, keyed by
	// response id: the records too large for HistoryKVBucket.
	HistoryBucket = "aptix_history"
	// HistoryKVBucket holds the records that fit a KV value (nearly all).
	HistoryKVBucket = "aptix_history_kv"
	// ResultsTTL keeps a result long enough to outlive any redelivery.
	ResultsTTL = 7 * 24 * time.Hour
	// HistoryTTL matches OpenAI's 30-day retention of stored responses, so
	// continuation behaves alike on every backend.
	HistoryTTL = 30 * 24 * time.Hour
)

// NewKVResultStore creates (idempotently) the results KV bucket and returns a
// ResultStore over it (also a CallRecords: started.go). A result is one JSON
// value; its size is bounded by the server's max_payload (1 MB by default).
func NewKVResultStore(ctx context.Context, js jetstream.JetStream) (ResultStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ResultsBucket, Description: "aptix: final LLM result per turn (pay once)",
		History: 1, TTL: ResultsTTL, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("create KV bucket %s: %w", ResultsBucket, err)
	}
	return &kvResults{kv: kv}, nil
}

type kvResults struct{ kv jetstream.KeyValue }

// Get returns the final result; a call record (started.go) is no result.
func (s *kvResults) Get(ctx context.Context, turnID string) (*contracts.LLMResult, error) {
	r, _, _, err := s.Lookup(ctx, turnID)
	return r, err
}

func (s *kvResults) Put(ctx context.Context, turnID string, r contracts.LLMResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode LLM result of turn %s: %w", turnID, err)
	}
	if _, err := s.kv.Put(ctx, turnID, b); err != nil {
		return fmt.Errorf("put LLM result of turn %s: %w", turnID, err)
	}
	return nil
}

// NewKVHistoryStore creates (idempotently) the history stores and returns a
// HistoryStore over them. A turn's record usually fits a KV value and goes
// to the KV bucket (one stored message); one that does not, or whose id is
// no valid key, goes to the object store, which chunks values of any size.
// Every turn on a backend without previous_response_id writes a record
// (releases before conversation recovery read the events wrote one for
// every turn), and the benchmark's profile showed the object store's put (a
// metadata read, a chunk and a metadata message) as a tenth of a turn's
// CPU; the KV put is one message.
func NewKVHistoryStore(ctx context.Context, js jetstream.JetStream) (HistoryStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: HistoryKVBucket, Description: "aptix: conversation items per response id, records that fit a value",
		History: 1, TTL: HistoryTTL, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("create KV bucket %s: %w", HistoryKVBucket, err)
	}
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: HistoryBucket, Description: "aptix: conversation items per response id (stateless continuation)",
		TTL: HistoryTTL, Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("create object store %s: %w", HistoryBucket, err)
	}
	inline := maxInlineHistory
	if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		// Room for the KV message's subject and headers.
		inline = min(inline, int(nc.MaxPayload())-4096)
	}
	return &objHistory{kv: kv, obs: obs, inline: inline}, nil
}

// objHistory keeps records up to inline bytes in kv, larger ones in obs.
type objHistory struct {
	kv     jetstream.KeyValue
	obs    jetstream.ObjectStore
	inline int
}

// maxHistoryChunk is the object store's default chunk size.
const maxHistoryChunk = 128 * 1024

// maxInlineHistory is the largest record kept as a KV value.
const maxInlineHistory = 256 * 1024

func (s *objHistory) Get(ctx context.Context, responseID string) ([]json.RawMessage, error) {
	b, err := s.get(ctx, responseID)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("decode history of response %s: %w", responseID, err)
	}
	return items, nil
}

// get reads the record from the KV bucket, else from the object store
// (large records, and those kept before the KV bucket existed).
func (s *objHistory) get(ctx context.Context, responseID string) ([]byte, error) {
	if validKey(responseID) {
		e, err := s.kv.Get(ctx, responseID)
		if err == nil {
			return e.Value(), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("get history of response %s: %w", responseID, err)
		}
	}
	b, err := s.obs.GetBytes(ctx, responseID)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("response %s: %w", responseID, ErrHistoryNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get history of response %s: %w", responseID, err)
	}
	return b, nil
}

func (s *objHistory) Put(ctx context.Context, responseID string, items []json.RawMessage) error {
	b, err := encodeItems(items)
	if err != nil {
		return fmt.Errorf("encode history of response %s: %w", responseID, err)
	}
	return s.PutRaw(ctx, responseID, b)
}

// PutRaw stores a record already encoded as a JSON array of items.
func (s *objHistory) PutRaw(ctx context.Context, responseID string, b []byte) error {
	if len(b) <= s.inline && validKey(responseID) {
		_, err := s.kv.Put(ctx, responseID, b)
		if err == nil {
			return nil
		}
		if !errors.Is(err, nats.ErrMaxPayload) {
			return fmt.Errorf("put history of response %s: %w", responseID, err)
		}
		// A server with a smaller max_payload than at start: chunk it.
	}
	// The chunk size is the value's (up to the store's default of 128 KiB):
	// Put allocates a buffer of the chunk size per call, and with the
	// default every turn allocated 128 KiB to keep ~10 KB.
	size := uint32(min(max(len(b), 1), maxHistoryChunk))
	meta := jetstream.ObjectMeta{Name: responseID, Opts: &jetstream.ObjectMetaOptions{ChunkSize: size}}
	if _, err := s.obs.Put(ctx, meta, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("put history of response %s: %w", responseID, err)
	}
	return nil
}

// validKey reports whether id can be a KV key (response ids of OpenAI and
// the sandbox always can; another backend's might not).
func validKey(id string) bool {
	if id == "" || id[0] == '.' || id[len(id)-1] == '.' || strings.Contains(id, "..") {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=', r == '.':
		default:
			return false
		}
	}
	return true
}

// encodeItems writes items as a JSON array. The items come out of a decoder
// (the body sent, the response received) and are valid JSON already, so they
// are joined as they are: json.Marshal validated and compacted every item
// again, which the benchmark's profile showed as a third of the LLM caller's
// CPU (every replayed turn stores its items). An empty item, which no decoder yields,
// goes the slow way and fails there.
func encodeItems(items []json.RawMessage) ([]byte, error) {
	n := 2
	for _, it := range items {
		if len(it) == 0 {
			return json.Marshal(items)
		}
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']'), nil
}
