package pipeline

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestNotFirst: every answer that says the subject already held an event
// (a single server's wrong last sequence, a replicated stream's, or a
// clustered stream's duplicate acknowledgement, checked there before the
// expectation) sends the publish to the reuse lookup; anything else is left
// as it was.
func TestNotFirst(t *testing.T) {
	other := errors.New("connection closed")
	for name, c := range map[string]struct {
		ack  *jetstream.PubAck
		err  error
		want error
	}{
		"wrong last sequence":   {err: &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, want: errNotFirst},
		"replicated wrong last": {err: &jetstream.APIError{ErrorCode: 10164}, want: errNotFirst},
		"duplicate":             {ack: &jetstream.PubAck{Duplicate: true, Sequence: 7}, want: errNotFirst},
		"stored":                {ack: &jetstream.PubAck{Sequence: 8}},
		"another API error":     {err: &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNotFound}, want: jetstream.ErrStreamNotFound},
		"another error":         {err: other, want: other},
	} {
		got := notFirst(c.ack, c.err)
		switch {
		case c.want == nil && got != nil, c.want == errNotFirst && !errors.Is(got, errNotFirst),
			c.want != nil && c.want != errNotFirst && errors.Is(got, errNotFirst):
			t.Errorf("%s: %v", name, got)
		}
	}
}
