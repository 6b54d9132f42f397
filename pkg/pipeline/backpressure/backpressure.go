// Package backpressure is how a full stream shows: a publish the server
// refused for lack of room wraps ErrAtCapacity, for clients to report and
// stages to retry.
package backpressure

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrAtCapacity is wrapped by a publish the server refused because its
// stream is full (discard "new"): backpressure, not loss. Clients show it
// and exit non-zero (the HTTP gateway answers 503 with Retry-After); stages
// retry with backoff without acknowledging their input.
var ErrAtCapacity = errors.New("aptix is at capacity: the stream is full, retry later")

// jsErrStoreFailed is JetStream's error code for a store refused by a limit
// ("maximum bytes exceeded", "maximum messages exceeded").
const jsErrStoreFailed = 10077

// IsAtCapacity reports whether err is a publish refused by a full stream.
func IsAtCapacity(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrAtCapacity) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == jsErrStoreFailed {
		return true
	}
	// nats.go sometimes flattens the API error into its text.
	msg := err.Error()
	return strings.Contains(msg, "maximum bytes exceeded") || strings.Contains(msg, "maximum messages exceeded") ||
		strings.Contains(msg, "insufficient resources")
}

// Wrap wraps a refused publish so callers can test for ErrAtCapacity.
func Wrap(err error) error {
	if err != nil && IsAtCapacity(err) && !errors.Is(err, ErrAtCapacity) {
		return &atCapacity{err: err}
	}
	return err
}

type atCapacity struct{ err error }

func (e *atCapacity) Error() string   { return ErrAtCapacity.Error() + ": " + e.err.Error() }
func (e *atCapacity) Unwrap() []error { return []error{ErrAtCapacity, e.err} }
