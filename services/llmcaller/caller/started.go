package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// "Call started" records (docs/reliability.md#re-attach). Pay-once stores a call's result
// once the call has finished; a crash while the model is still generating
// left nothing behind, and the redelivered turn used to call again, paying
// twice. So every call also leaves a small record that it was started: before
// the request is sent (so a repeat is never silent), and, with a backend that
// keeps background responses (capability reattach), again as soon as
// response.created names the upstream id, before the first delta is relayed.
// A redelivered turn finds that record and re-attaches to the response it
// already paid for.
//
// The record lives under the turn's own key in the pay-once bucket, in place
// of the result it precedes: a redelivery's lookup (claim) finds the result
// or the record in one read, and the final result replaces the record, so no
// record outlives its turn's result. When the result is kept elsewhere
// (Input.Stored: the LLM caller stage's output event), the record stays,
// the turn's one write before the model; the lookup asks Stored first, so
// a record means an unfinished call only when no result is there. Writes
// are compare-and-set on the key's revision, so a record never replaces a
// stored result. A first delivery
// (Input.FirstDelivery) reads nothing: its first record is a create, which
// fails on a taken key, and the call then goes back to the lookup before
// any request is sent.

// Started is the record of a call in flight for a turn.
type Started struct {
	TurnID string `json:"turnId"`
	// Call counts the upstream calls made for the turn, this one included:
	// 2 or more means the model was called again after an interruption.
	Call int `json:"call"`
	// Attempt is the attempt within its delivery that sent it.
	Attempt int    `json:"attempt"`
	Profile string `json:"profile"`
	BaseURL string `json:"baseUrl"`
	// Background is set when the call was created in background mode, so the
	// upstream keeps it after the caller goes away.
	Background bool `json:"background,omitempty"`
	// ResponseID is the upstream response id, once response.created named
	// it; empty while the call's request is on its way.
	ResponseID string `json:"responseId,omitempty"`
	// CreatedSeq is the sequence number of that response.created event:
	// a resumed stream starts after it.
	CreatedSeq int `json:"createdSeq,omitempty"`
	// SeqBase is added to the call's upstream sequence numbers in the
	// deltas' UpstreamSeq (non-zero for a call replacing a lost one).
	SeqBase int       `json:"seqBase,omitempty"`
	At      time.Time `json:"at"`
}

// CallRecords is a ResultStore that also keeps Started records under the
// turn's key. NewKVResultStore and NewMemResultStore return one; a Caller
// uses it when its Results store is one.
type CallRecords interface {
	ResultStore
	// Lookup returns the turn's final result, or else its Started record
	// (with the revision to pass to Start), or neither.
	Lookup(ctx context.Context, turnID string) (*contracts.LLMResult, *Started, uint64, error)
	// Start writes a record if the key is still at revision rev (0: absent)
	// and returns the new revision. It fails with ErrRecordChanged when the
	// key has moved on (a result was stored, or another delivery wrote).
	Start(ctx context.Context, turnID string, s Started, rev uint64) (uint64, error)
}

// ErrRecordChanged is returned by CallRecords.Start when the turn's key is
// no longer at the expected revision.
var ErrRecordChanged = errors.New("call record changed since it was read")

// startedKey marks a value as a Started record, not a result.
const startedKey = `{"aptixCallStarted":`

type startedValue struct {
	Started Started `json:"aptixCallStarted"`
}

// decodeRecord reads a pay-once value: a final result or a Started record.
func decodeRecord(turnID string, b []byte) (*contracts.LLMResult, *Started, error) {
	if bytes.HasPrefix(b, []byte(startedKey)) {
		var v startedValue
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, nil, fmt.Errorf("decode call record of turn %s: %w", turnID, err)
		}
		return nil, &v.Started, nil
	}
	var r contracts.LLMResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, fmt.Errorf("decode LLM result of turn %s: %w", turnID, err)
	}
	return &r, nil, nil
}

func (s *kvResults) Lookup(ctx context.Context, turnID string) (*contracts.LLMResult, *Started, uint64, error) {
	e, err := s.kv.Get(ctx, turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("get LLM result of turn %s: %w", turnID, err)
	}
	r, st, err := decodeRecord(turnID, e.Value())
	return r, st, e.Revision(), err
}

func (s *kvResults) Start(ctx context.Context, turnID string, st Started, rev uint64) (uint64, error) {
	b, err := json.Marshal(startedValue{Started: st})
	if err != nil {
		return 0, fmt.Errorf("encode call record of turn %s: %w", turnID, err)
	}
	var n uint64
	if rev == 0 {
		n, err = s.kv.Create(ctx, turnID, b)
	} else {
		n, err = s.kv.Update(ctx, turnID, b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
		return 0, fmt.Errorf("record call of turn %s: %w", turnID, ErrRecordChanged)
	}
	if err != nil {
		return 0, fmt.Errorf("record call of turn %s: %w", turnID, err)
	}
	return n, nil
}

// isWrongSequence reports a KV update refused for its expected revision.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

func (s *memResults) Lookup(_ context.Context, turnID string) (*contracts.LLMResult, *Started, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[turnID]; ok {
		return &r, nil, s.rev[turnID], nil
	}
	if st, ok := s.started[turnID]; ok {
		return nil, &st, s.rev[turnID], nil
	}
	return nil, nil, 0, nil
}

func (s *memResults) Start(_ context.Context, turnID string, st Started, rev uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rev[turnID] != rev {
		return 0, fmt.Errorf("record call of turn %s: %w", turnID, ErrRecordChanged)
	}
	s.seq++
	s.rev[turnID] = s.seq
	s.started[turnID] = st
	return s.seq, nil
}

// startLog writes one delivery's Started records in order. The first (before
// the request) is waited for at once; the one naming the upstream id is
// written in the background while the model generates, and waited for
// before the first delta is relayed and before the result is stored, so
// neither overtakes it.
type startLog struct {
	store  CallRecords
	turnID string

	mu      sync.Mutex
	rev     uint64
	pending chan struct{} // closed when the last write has finished
	err     error         // the last write's error
}

// write records st after any earlier write of this log has finished.
func (l *startLog) write(ctx context.Context, st Started) {
	l.wait()
	done := make(chan struct{})
	l.mu.Lock()
	l.pending = done
	rev := l.rev
	l.mu.Unlock()
	go func() {
		defer close(done)
		n, err := l.store.Start(context.WithoutCancel(ctx), l.turnID, st, rev)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.err = err
		if err == nil {
			l.rev = n
		}
	}()
}

// wait blocks until the last write has finished and returns its error.
func (l *startLog) wait() error {
	l.mu.Lock()
	p := l.pending
	l.mu.Unlock()
	if p != nil {
		<-p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// records returns the caller's CallRecords, if its result store is one.
func (c *Caller) records() CallRecords {
	cr, _ := c.o.Results.(CallRecords)
	return cr
}

// progress is what this process knows of an interrupted call: the last
// upstream sequence number whose delta it relayed and its next delta
// number, so a redelivery handled here resumes without repeating a delta.
// After a crash nothing is known: the resumed deltas are relayed again with
// their UpstreamSeq, and a client drops those it has seen.
type progress struct {
	responseID string
	relayed    int
	seq        int
}

// maxProgress bounds the interrupted calls remembered (entries are removed
// when the turn's result is stored; this only guards against turns that
// never come back).
const maxProgress = 10000

func (c *Caller) saveProgress(turnID string, p progress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.progress) >= maxProgress {
		clear(c.progress)
	}
	c.progress[turnID] = p
}

func (c *Caller) takeProgress(turnID string) (progress, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.progress[turnID]
	delete(c.progress, turnID)
	return p, ok
}
