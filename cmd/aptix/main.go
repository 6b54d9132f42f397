// Command aptix is the Aptix CLI and all-in-one binary. Each subcommand lives
// in its own file and registers itself with root in an init function, so a
// command is one file to read.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var root = &cobra.Command{
	Use:   "aptix",
	Short: "Run LLM agent turns as an event-driven pipeline on NATS JetStream",
	Long: "Run LLM agent turns as an event-driven pipeline on NATS JetStream.\n\n" +
		"Exit status: 0 on success; 1 when a turn fails (its error result is printed) or on a\n" +
		"runtime error (no NATS, a stream or store that cannot be read); 2 for a usage or input\n" +
		"error (an unknown command or flag, a missing argument, an invalid id, file or request,\n" +
		"a turn refused for its tools or tool choice);\n" +
		"75 when Aptix is at capacity and refused the turn (nothing was accepted: retry later).",
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

func main() { os.Exit(execute(os.Args[1:], os.Stderr)) }
