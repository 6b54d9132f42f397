// Package subjectscan finds the newest event on one subject that a
// predicate accepts, for the readers that must skip other runs' events
// stored on the same subject (the runtime's Output, the conversation
// record's derivation).
package subjectscan

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NewestOn is the newest event on subject whose headers keep accepts, or
// nil. The newest event is almost always the one; when it is not, the
// subject's few events are read from the oldest on, as nothing reads a
// subject backwards.
func NewestOn(ctx context.Context, s jetstream.Stream, subject string, keep func(nats.Header) bool) (*jetstream.RawStreamMsg, error) {
	last, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if keep(last.Header) {
		return last, nil
	}
	var found *jetstream.RawStreamMsg
	for seq := uint64(1); seq < last.Sequence; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if m.Sequence >= last.Sequence {
			break
		}
		if keep(m.Header) {
			found = m
		}
		seq = m.Sequence
	}
	return found, nil
}
