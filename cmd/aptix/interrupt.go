package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitInterrupted is the status of a process ended by a second Ctrl-C
// (128 + SIGINT, as a shell reports it).
const exitInterrupted = 130

// interruptible returns a context cancelled by the first SIGINT or SIGTERM,
// which starts a graceful stop. A second signal calls exit at once: a stop
// that hangs (a drain waiting on a stuck call, a start blocked on a lock)
// must never leave Ctrl-C without effect. stop restores the default
// handling of the signals.
func interruptible(ctx context.Context, w io.Writer, exit func(int)) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintln(w, "aptix: stopping; in-flight turns finish first (Ctrl-C again to exit at once)")
		cancel()
		select {
		case <-sigs:
			fmt.Fprintln(w, "aptix: second interrupt: exiting now")
			exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
