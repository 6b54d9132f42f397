package main

import (
	"context"
	"fmt"
	"time"
)

// bounded runs f with ctx and returns f's error, or, should f still be
// blocked a moment after ctx ended, an error of its own: a read blocked
// inside the NATS client while the server is gone (a consumer re-creating
// itself, a reconnect) must never keep a command past its --timeout.
func bounded(ctx context.Context, f func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// f normally notices ctx itself and says more about what it waited for.
	select {
	case err := <-done:
		return err
	case <-time.After(250 * time.Millisecond):
		return fmt.Errorf("gave up waiting for the server: %w", context.Cause(ctx))
	}
}
