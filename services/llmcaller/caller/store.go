package caller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ResultStore keeps each turn's final LLM result under its key
// (Input.TurnID), so a redelivered event returns the stored result instead
// of paying for the call twice ("pay once", docs/reliability.md#paid-once).
type ResultStore interface {
	// Get returns the stored result, or nil and no error when there is none.
	Get(ctx context.Context, turnID string) (*contracts.LLMResult, error)
	// Put stores a final result, replacing any earlier one.
	Put(ctx context.Context, turnID string, r contracts.LLMResult) error
}

// HistoryStore keeps a conversation's items (inputs and outputs, in order)
// under the response id that ended them, for backends that cannot thread
// turns by previous_response_id.
type HistoryStore interface {
	// Get returns the items stored under responseID, or ErrHistoryNotFound.
	Get(ctx context.Context, responseID string) ([]json.RawMessage, error)
	// Put stores the full item list that responseID ends.
	Put(ctx context.Context, responseID string, items []json.RawMessage) error
}

// ErrHistoryNotFound is returned by HistoryStore.Get for an unknown response id.
var ErrHistoryNotFound = errors.New("conversation history not found")

// NewMemResultStore returns a process-local ResultStore (tests, single process).
// It is also a CallRecords.
func NewMemResultStore() ResultStore {
	return &memResults{m: map[string]contracts.LLMResult{}, started: map[string]Started{}, rev: map[string]uint64{}}
}

type memResults struct {
	mu      sync.Mutex
	m       map[string]contracts.LLMResult
	started map[string]Started // call records of turns without a result
	rev     map[string]uint64  // per key, as a KV bucket's revisions
	seq     uint64
}

func (s *memResults) Get(_ context.Context, turnID string) (*contracts.LLMResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[turnID]
	if !ok {
		return nil, nil
	}
	return &r, nil
}

func (s *memResults) Put(_ context.Context, turnID string, r contracts.LLMResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[turnID] = r
	delete(s.started, turnID)
	s.seq++
	s.rev[turnID] = s.seq
	return nil
}

// NewMemHistoryStore returns a process-local HistoryStore (tests, single process).
func NewMemHistoryStore() HistoryStore { return &memHistory{m: map[string][]json.RawMessage{}} }

type memHistory struct {
	mu sync.Mutex
	m  map[string][]json.RawMessage
}

func (s *memHistory) Get(_ context.Context, responseID string) ([]json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items, ok := s.m[responseID]
	if !ok {
		return nil, ErrHistoryNotFound
	}
	return append([]json.RawMessage(nil), items...), nil
}

func (s *memHistory) Put(_ context.Context, responseID string, items []json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[responseID] = append([]json.RawMessage(nil), items...)
	return nil
}
