package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Bucket is the JetStream KV bucket where gateways keep what the stream
// cannot answer quickly: a response id's conversation and turn, the echoed
// request parameters, and each conversation's head. Every replica reads it,
// so any replica answers for a response another created.
const Bucket = "aptix_responses"

// Store holds response records ("resp.<id>": written for a response whose
// id does not name its conversation, record.go; a deletion for any) and
// conversation heads ("head.<conversation>": the id of the newest response
// of the conversation, written by its first continuation or by each turn of
// a named conversation; a conversation without one has its first response
// as its head).
type Store struct{ kv jetstream.KeyValue }

// OpenStore creates the bucket if needed.
func OpenStore(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Aptix gateway: response id → conversation/turn, and each conversation's head",
		History:     1,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", Bucket, err)
	}
	return &Store{kv: kv}, nil
}

func respKey(id string) string   { return "resp." + id }
func headKey(conv string) string { return "head." + conv }

// checkToken refuses a key built from an id that is not a subject token:
// the operations check ids first (responses.CheckID), this is the backstop
// that keeps an overlong one off the connection, whose server would close
// it (docs/security.md).
func checkToken(what, id string) error {
	if !contracts.IsToken(id) {
		return fmt.Errorf("%s %q is not an id ([A-Za-z0-9_-]{1,%d})", what, responses.Clip(id), contracts.MaxIDLen)
	}
	return nil
}

// Put records a new response (at most once: a record is never replaced).
func (s *Store) Put(ctx context.Context, m responses.Meta) error {
	if err := checkToken("response id", m.ID); err != nil {
		return err
	}
	b, err := jsonv2.Marshal(m, jsonCodec)
	if err != nil {
		return fmt.Errorf("encode response record: %w", err)
	}
	if _, err := s.kv.Create(ctx, respKey(m.ID), b); err != nil {
		if lostRace(err) {
			// Written before by this create (a retry after a lost
			// acknowledgement): ids are never reused.
			if e, gerr := s.kv.Get(ctx, respKey(m.ID)); gerr == nil && string(e.Value()) == string(b) {
				return nil
			}
		}
		return fmt.Errorf("record response %s: %w", m.ID, err)
	}
	return nil
}

// tombstone is the value a deleted response's record key holds: a
// response whose record is derived from its turn's events (record.go)
// has no record to remove, so its deletion is written, and a KV delete
// marker would read as "no record" (jetstream's Get says not found).
const tombstone = "deleted"

// Get returns the record of id, or nil when there is none (never
// written, or deleted).
func (s *Store) Get(ctx context.Context, id string) (*responses.Meta, error) {
	m, _, err := s.get(ctx, id)
	return m, err
}

// get returns the record of id; written says whether its key holds
// anything (a record, or a deletion), so a response with no written
// record is looked for in its turn's events only when it was not deleted.
func (s *Store) get(ctx context.Context, id string) (m *responses.Meta, written bool, err error) {
	if !contracts.IsToken(id) {
		return nil, false, nil // no response has it
	}
	e, err := s.kv.Get(ctx, respKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read response %s: %w", id, err)
	}
	if string(e.Value()) == tombstone {
		return nil, true, nil
	}
	m = new(responses.Meta)
	if err := json.Unmarshal(e.Value(), m); err != nil {
		return nil, true, fmt.Errorf("decode response %s: %w", id, err)
	}
	return m, true, nil
}

// Delete removes the record: the response is gone for GET and
// continuation, whether its record was written or is derived.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := checkToken("response id", id); err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, respKey(id), []byte(tombstone)); err != nil {
		return fmt.Errorf("delete response %s: %w", id, err)
	}
	return nil
}

// ClaimHead moves the conversation's head from prev to next, atomically: it
// reports false when prev is no longer the head (a later turn exists, or a
// concurrent continuation of prev won), and the caller then branches into a
// new conversation so the branch never sees turns after prev. A
// conversation whose head was never written is claimed with claimFirst.
func (s *Store) ClaimHead(ctx context.Context, conv, prev, next string) (bool, error) {
	ok, _, err := s.claimHead(ctx, conv, prev, next)
	return ok, err
}

// claimHead is ClaimHead that also returns the head's new KV revision.
func (s *Store) claimHead(ctx context.Context, conv, prev, next string) (bool, uint64, error) {
	if err := checkToken("conversation", conv); err != nil {
		return false, 0, err
	}
	e, err := s.kv.Get(ctx, headKey(conv))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("read head of %s: %w", conv, err)
	}
	if string(e.Value()) != prev {
		return false, 0, nil
	}
	return s.ClaimHeadAt(ctx, conv, next, e.Revision())
}

// claimFirst continues a conversation from its first response: a new
// conversation writes no head, its first response is the head until a
// continuation creates the head. The create fails when the head exists
// (another continuation created it: the first response is no longer the
// newest), and claimFirst reports false then (branch). No read is needed:
// a head never names the first response itself.
func (s *Store) claimFirst(ctx context.Context, conv, next string) (bool, uint64, error) {
	if err := checkToken("conversation", conv); err != nil {
		return false, 0, err
	}
	rev, err := s.kv.Create(ctx, headKey(conv), []byte(next))
	if err != nil {
		if lostRace(err) {
			return false, 0, nil
		}
		return false, 0, fmt.Errorf("claim head of %s: %w", conv, err)
	}
	return true, rev, nil
}

// lostRace reports whether a compare-and-set of a head failed because the
// head is not where the caller expected it (another continuation moved or
// created it).
func lostRace(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// ClaimHeadAt moves the conversation's head to next if it is still at
// revision rev (the revision the caller itself wrote when the previous
// response became the head): the WebSocket hot path, one compare-and-set
// and no read. It reports false when the head moved since (branch).
func (s *Store) ClaimHeadAt(ctx context.Context, conv, next string, rev uint64) (bool, uint64, error) {
	if err := checkToken("conversation", conv); err != nil {
		return false, 0, err
	}
	nrev, err := s.kv.Update(ctx, headKey(conv), []byte(next), rev)
	if err != nil {
		if lostRace(err) {
			return false, 0, nil // lost the race: branch
		}
		return false, 0, fmt.Errorf("move head of %s: %w", conv, err)
	}
	return true, nrev, nil
}

// SetHead makes id the conversation's head (a conversation the client
// named with the conversation parameter: each of its turns is the head).
func (s *Store) SetHead(ctx context.Context, conv, id string) error {
	_, err := s.setHead(ctx, conv, id)
	return err
}

func (s *Store) setHead(ctx context.Context, conv, id string) (uint64, error) {
	if err := checkToken("conversation", conv); err != nil {
		return 0, err
	}
	rev, err := s.kv.Put(ctx, headKey(conv), []byte(id))
	if err != nil {
		return 0, fmt.Errorf("set head of %s: %w", conv, err)
	}
	return rev, nil
}
