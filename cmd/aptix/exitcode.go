package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
)

// Exit statuses, documented in `aptix help` and the README.
const (
	exitOK      = 0
	exitFailure = 1 // a failed turn or a runtime error
	exitUsage   = 2 // a usage or input error
)

// running is set once a command's RunE starts. cobra reports unknown
// commands, bad arguments and missing required flags before that, as plain
// errors: an error while running is false is a usage error whatever its type.
var running bool

var wrapOnce sync.Once

// markRunning wraps every command's RunE so that running tells usage
// errors (found by cobra before RunE) from the command's own errors.
func markRunning(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			running = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRunning(sub)
	}
}

// execute runs the CLI with args, prints a failure on stderr and returns
// the process's exit status.
func execute(args []string, stderr io.Writer) int {
	wrapOnce.Do(func() {
		root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
		markRunning(root)
	})
	running = false
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "aptix:", err)
	return exitCode(err, running)
}

// exitCode classifies err: usage errors, invalid requests or ids, and any
// error cobra raised before the command ran are exit status 2; a turn
// refused at capacity 75 (retry later); the rest 1.
func exitCode(err error, ran bool) int {
	var ue usageError
	var ve *contracts.ValidationError
	var ie interface{ IsInputError() bool } // marks input errors of commands from other modules
	switch {
	case err == nil:
		return exitOK
	case !ran, errors.As(err, &ue), errors.As(err, &ve), errors.As(err, &ie) && ie.IsInputError():
		return exitUsage
	case errors.Is(err, backpressure.ErrAtCapacity):
		return exitTempFail
	}
	return exitFailure
}
