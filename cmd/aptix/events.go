package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

func init() {
	var (
		conversation string
		raw          bool
		seq          uint64
	)
	cmd := &cobra.Command{
		Use:   "events --conversation C [--seq N] [--raw]",
		Short: "List a conversation's stored events in order, or print one in full",
		Long: "events reads the APTIX stream: every stage's event of the conversation (and any dead letter\n" +
			"that came from it), oldest first, with stream sequence, time, stage, turn, size and trace id; a note\n" +
			"marks the event a turn entered with past stages it skipped (\"retriever: skipped\": no retrieval).\n" +
			"--seq N prints that event in full (headers and pretty JSON); --raw prints the payload as stored.\n" +
			"Any stored event can be re-driven by publishing it again under a new turn id.",
		Example: `  aptix events --conversation demo
  aptix events --conversation demo --seq 12
  aptix events --conversation demo --seq 12 --raw > turn.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if conversation == "" {
				return usagef("--conversation is required")
			}
			if !contracts.IsToken(conversation) {
				return usagef("--conversation %q: ids are 1-128 characters of [A-Za-z0-9_-]", conversation)
			}
			return runEvents(cmd.Context(), conversation, seq, raw, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&conversation, "conversation", "", "conversation id")
	cmd.Flags().Uint64Var(&seq, "seq", 0, "stream sequence of the event to print in full")
	cmd.Flags().BoolVar(&raw, "raw", false, "with --seq, print the payload exactly as stored")
	root.AddCommand(cmd)
}

// runEvents lists the conversation's events, or prints the one at seq.
func runEvents(ctx context.Context, conversation string, seq uint64, raw bool, out io.Writer) error {
	nc, err := connectRunning("events")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var events []history.Event
	err = bounded(ctx, func(ctx context.Context) error {
		evs, err := history.ConversationEvents(ctx, js, conversation)
		events = evs // read only when bounded returns nil, after this
		return err
	})
	if err != nil {
		return err
	}
	if seq == 0 {
		if len(events) == 0 {
			return fmt.Errorf("no stored events for conversation %s", conversation)
		}
		return listEvents(out, conversation, events)
	}
	for _, e := range events {
		if e.Seq == seq {
			return printEvent(out, e, raw)
		}
	}
	if len(events) == 0 {
		return fmt.Errorf("no stored events for conversation %s", conversation)
	}
	return fmt.Errorf("conversation %s has no event at stream sequence %d (its events are %d to %d; list them with `%s`)",
		conversation, seq, events[0].Seq, events[len(events)-1].Seq, hint(clientServer(), "events", "--conversation", conversation))
}

func listEvents(w io.Writer, conversation string, events []history.Event) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSTAGE\tTURN\tSIZE\tTRACE\tNOTE")
	for _, e := range events {
		note := ""
		if sk := history.Skipped(e.Header); len(sk) > 0 {
			// The turn entered here: no event of the skipped stages exists.
			note = strings.Join(sk, ", ") + ": skipped"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Seq, e.Time.UTC().Format("15:04:05.000"), e.Stage, e.Turn, len(e.Data), history.TraceID(e.Header), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nPrint one in full (add --raw for the stored bytes): %s\n",
		hint(clientServer(), "events", "--conversation", conversation, "--seq", strconv.FormatUint(events[len(events)-1].Seq, 10)))
	return nil
}

func printEvent(w io.Writer, e history.Event, raw bool) error {
	if raw {
		_, err := w.Write(append(e.Data, '\n'))
		return err
	}
	fmt.Fprintf(w, "seq %d  %s  %s\n", e.Seq, e.Time.UTC().Format(time.RFC3339Nano), e.Subject)
	keys := make([]string, 0, len(e.Header))
	for k := range e.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(e.Header[k], ", "))
	}
	fmt.Fprintln(w)
	var buf bytes.Buffer
	if err := json.Indent(&buf, e.Data, "", "  "); err != nil {
		// Not JSON (a dead-lettered malformed event): show it as it is.
		_, err = fmt.Fprintf(w, "%s\n", e.Data)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}
