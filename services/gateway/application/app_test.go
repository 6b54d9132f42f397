package application

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestBusError: clients retry a 503 with Retry-After: a full
// admission queue (JetStream 10077, "maximum bytes exceeded") and a bus that
// does not answer are 503s; a turn over NATS' payload limit is a 413; any
// other publish failure a 500.
func TestBusError(t *testing.T) {
	nc, _ := natstest.JetStream(t)
	s := &App{cfg: Config{NC: nc, MaxBodyBytes: 1024}}
	cases := []struct {
		err    error
		status int
	}{
		{fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}), 503},
		{errors.New("nats: maximum messages exceeded"), 503},
		{fmt.Errorf("publish: %w", nats.ErrTimeout), 503},
		{fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), 503},
		{fmt.Errorf("publish: %w", nats.ErrMaxPayload), 413},
		{errors.New("something else"), 500},
	}
	for _, tc := range cases {
		if e := s.BusError(tc.err); e.Status != tc.status {
			t.Errorf("%v → %d, want %d", tc.err, e.Status, tc.status)
		}
	}
	nc.Close()
	if e := s.BusError(errors.New("connection closed")); e.Status != 503 {
		t.Errorf("closed connection → %d", e.Status)
	}
}
