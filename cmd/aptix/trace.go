package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// trace draws a turn's timeline from its stored events alone, so it works
// without an OTLP collector: when each stage's output was stored, and, where
// the turn records it, how much of a stage's time was the work itself (the
// search, the model call) rather than waiting in its consumer and overhead.
func init() {
	var conv string
	cmd := &cobra.Command{
		Use:   "trace TURN [--conversation C]",
		Short: "Show a turn's stages as a waterfall, from its stored events",
		Long: "trace reads the turn's stored events (retrieved, enveloped, responded, completed) and draws when each\n" +
			"was stored, the time each stage took from its input to its output and, for the retriever and the\n" +
			"llmcaller, the work they recorded (search, model call). With OTEL_* set, the full spans are in your\n" +
			"tracing backend under the trace id shown.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range []string{conv, args[0]} {
				if id != "" && !contracts.IsToken(id) {
					return usagef("%q: ids are 1-%d characters of [A-Za-z0-9_-]", id, contracts.MaxIDLen)
				}
			}
			return withJS(cmd.Context(), "trace", func(ctx context.Context, js jetstream.JetStream) error {
				v, err := history.LoadTurn(ctx, js, conv, args[0])
				if err != nil {
					return err
				}
				return printTrace(cmd.OutOrStdout(), v, v.TraceOf())
			})
		},
	}
	cmd.Flags().StringVar(&conv, "conversation", "", "the turn's conversation (found from the stream if not given)")
	root.AddCommand(cmd)
}

const traceWidth = 40

func printTrace(w io.Writer, v history.TurnView, trace string) error {
	var first, last time.Time
	var stages []string
	for _, s := range history.Stages {
		at, ok := v.Times[s]
		if !ok {
			continue
		}
		if first.IsZero() {
			first = at
		}
		last = at
		stages = append(stages, s)
	}
	total := last.Sub(first)
	fmt.Fprintf(w, "turn %s (conversation %s), trace %s: %s from the first stored event to the last\n\n", v.Turn, v.Conversation, trace, ms(total))
	fmt.Fprintf(w, "%-10s %-10s %9s %9s\n", "STAGE", "EVENT", "AT", "TOOK")
	for _, sk := range v.Skipped() {
		// No event of a skipped stage exists: say so rather than draw one.
		fmt.Fprintf(w, "%-10s %-10s %9s %9s  skipped: the turn entered at aptix.%s without it (no %s work to do)\n", sk, "-", "-", "-", stages[0], sk)
	}
	var prev time.Time
	for i, s := range stages {
		at := v.Times[s]
		took, note := time.Duration(0), ""
		if i > 0 {
			took = at.Sub(prev)
		}
		t := v.Turns[s]
		switch s {
		case contracts.StageRetrieved:
			if t.Retrieval != nil && len(v.Skipped()) == 0 {
				note = fmt.Sprintf("search %s (queue wait before it: not recorded)", msf(t.Retrieval.TookMs))
			}
		case contracts.StageResponded:
			if t.LLM != nil {
				note = fmt.Sprintf("model call %s, %d attempt(s)", msf(t.LLM.DurationMs), t.LLM.Attempts)
				if i > 0 {
					note += fmt.Sprintf("; waiting and overhead %s", ms(took-time.Duration(t.LLM.DurationMs*float64(time.Millisecond))))
				}
				if t.LLM.Cached {
					note += "; pay-once result, no call"
				}
			}
		}
		tookCell := ms(took)
		if i == 0 {
			tookCell = "-"
			if sk := v.Skipped(); len(sk) > 0 {
				note = "entry event: " + strings.Join(sk, ", ") + " skipped"
			}
			note = strings.TrimSuffix("first stored event; "+note, "; ")
		}
		var h map[string][]string
		if m := v.Msgs[s]; m != nil {
			h = m.Header
		}
		line := fmt.Sprintf("%-10s %-10s %9s %9s  %s %s", history.Writer(s, h), s, ms(at.Sub(first)), tookCell, bar(prev.Sub(first), took, total, i == 0), note)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		prev = at
	}
	return nil
}

// bar draws a stage's span on a line of traceWidth cells.
func bar(start, took, total time.Duration, first bool) string {
	if total <= 0 || first {
		return "|" + strings.Repeat(" ", traceWidth) + "|"
	}
	cell := func(d time.Duration) int { return int(float64(d)/float64(total)*traceWidth + 0.5) }
	from := min(cell(start), traceWidth-1)
	n := min(max(1, cell(start+took)-from), traceWidth-from)
	return "|" + strings.Repeat(" ", from) + strings.Repeat("█", n) + strings.Repeat(" ", traceWidth-from-n) + "|"
}

func ms(d time.Duration) string { return msf(float64(d.Microseconds()) / 1000) }

func msf(v float64) string { return fmt.Sprintf("%.1fms", v) }
