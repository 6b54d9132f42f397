package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// diff answers "why did these two turns answer differently?" from the
// stored events alone: what each stage saw and produced, side by side, and
// the exact upstream request bodies as a structural JSON diff. It is the
// companion of replay: `aptix diff <orig> <replay>`.
func init() {
	var conv1, conv2 string
	cmd := &cobra.Command{
		Use:   "diff T1 T2 [--conversation C] [--conversation2 C2]",
		Short: "Show what differs between two turns, stage by stage",
		Long: "diff reads both turns' stored events and compares the retrieved chunk ids, the backend and model,\n" +
			"the upstream /responses body (a structural JSON diff), the response text, tool calls, usage and\n" +
			"each stage's timing. Each turn's conversation is found from the stream unless given.",
		Example: `  aptix diff 01a2...e4 01a2...f9
  aptix diff t1 t1-replay --conversation demo`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range append([]string{conv1, conv2}, args...) {
				if id != "" && !contracts.IsToken(id) {
					return usagef("%q: ids are 1-%d characters of [A-Za-z0-9_-]", id, contracts.MaxIDLen)
				}
			}
			if conv2 == "" {
				conv2 = conv1
			}
			return withJS(cmd.Context(), "diff", func(ctx context.Context, js jetstream.JetStream) error {
				a, err := history.LoadTurn(ctx, js, conv1, args[0])
				if err != nil {
					return err
				}
				b, err := history.LoadTurn(ctx, js, conv2, args[1])
				if err != nil {
					return err
				}
				return printDiff(cmd.OutOrStdout(), a, b)
			})
		},
	}
	cmd.Flags().StringVar(&conv1, "conversation", "", "conversation of T1 (and of T2 unless --conversation2)")
	cmd.Flags().StringVar(&conv2, "conversation2", "", "conversation of T2")
	root.AddCommand(cmd)
}

func printDiff(w io.Writer, a, b history.TurnView) error {
	fmt.Fprintf(w, "T1 %s (conversation %s)\nT2 %s (conversation %s)\n\n", a.Turn, a.Conversation, b.Turn, b.Conversation)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tFIELD\tT1\tT2\t")
	for _, r := range history.DiffRows(a, b) {
		mark := ""
		if r.Differs() { // timings always differ a little
			mark = "≠"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Stage, r.Field, r.A, r.B, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if ta, ok := a.Turns[contracts.StageRetrieved]; ok {
		if tb, ok := b.Turns[contracts.StageRetrieved]; ok {
			printIDDiff(w, "RETRIEVED CHUNKS", history.ChunkIDs(ta), history.ChunkIDs(tb))
		}
	}
	if ea, eb := a.Turns[contracts.StageEnveloped].Envelope, b.Turns[contracts.StageEnveloped].Envelope; ea != nil && eb != nil {
		printIDDiff(w, "CONTEXT SOURCES", history.SourceIDs(ea), history.SourceIDs(eb))
	}

	fmt.Fprintln(w, "\nUPSTREAM REQUEST BODY (aptix.enveloped, T1 → T2)")
	ea, eb := a.Turns[contracts.StageEnveloped].Envelope, b.Turns[contracts.StageEnveloped].Envelope
	switch {
	case ea == nil || eb == nil || len(ea.Body) == 0 || len(eb.Body) == 0:
		fmt.Fprintln(w, "  not comparable: a turn has no stored enveloped event (a replay from the mapper, or trimmed)")
	default:
		lines, err := history.JSONDiff(ea.Body, eb.Body)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			fmt.Fprintln(w, "  identical")
		}
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
	}

	ra, rb := a.Response(), b.Response()
	fmt.Fprintln(w, "\nRESPONSE TEXT")
	if ra.Text == rb.Text {
		fmt.Fprintf(w, "  identical (%d characters)\n", len(ra.Text))
	} else {
		fmt.Fprintf(w, "--- T1\n%s\n+++ T2\n%s\n", ra.Text, rb.Text)
	}
	return nil
}

// printIDDiff lists the ids only one side has, when the lists differ.
func printIDDiff(w io.Writer, title string, a, b []string) {
	removed, added, reordered := history.IDChanges(a, b)
	if len(removed) == 0 && len(added) == 0 && !reordered {
		return
	}
	fmt.Fprintf(w, "\n%s (T1 → T2)\n", title)
	for _, id := range removed {
		fmt.Fprintln(w, "  - "+id)
	}
	for _, id := range added {
		fmt.Fprintln(w, "  + "+id)
	}
	if reordered {
		fmt.Fprintln(w, "  same ids, another order")
	}
}
