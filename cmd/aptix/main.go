// Command aptix is the Aptix CLI and all-in-one binary. Each subcommand lives
// in its own file and registers itself with root in an init function, so a
// command is one file to read.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/pipeline"
)

var root = &cobra.Command{
	Use:           "aptix",
	Short:         "Run LLM agent turns as an event-driven pipeline on NATS JetStream",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// usageError marks bad input from the user: printed on stderr, exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitTempFail (EX_TEMPFAIL) says the turn was refused because Aptix is at
// capacity: nothing was accepted, and the same command may be retried later.
const exitTempFail = 75

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "aptix:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		if errors.Is(err, pipeline.ErrAtCapacity) {
			os.Exit(exitTempFail)
		}
		os.Exit(1)
	}
}
