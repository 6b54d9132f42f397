package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// Dead letters are events a stage gave up on (pipeline stage.go deadLetter):
// stored on aptix.dead.<stage> in APTIX with the original payload and
// headers plus the reason. After an outage an operator lists them and
// re-drives them; a dead letter is numbered by its stream sequence.
func init() {
	var stage string
	var all bool
	dead := &cobra.Command{
		Use:   "dead",
		Short: "List, show, retry and purge dead letters (events a stage gave up on)",
		Long: "A stage that fails an event on every delivery stores it on aptix.dead.<stage> with the reason,\n" +
			"and ends the turn with an error completion. Once the cause is fixed, `aptix dead retry` re-publishes\n" +
			"the original event (payload and headers) on its original subject so the stage tries again; the\n" +
			"retried turn's new completion is its last one, which `aptix exec` and Await read.",
		Example: `  aptix dead ls
  aptix dead show 42
  aptix dead retry 42
  aptix dead retry --all --stage retriever
  aptix dead purge --stage envelope`,
	}
	ls := &cobra.Command{
		Use: "ls [--stage S]", Short: "List dead letters: sequence, age, stage, subject, deliveries, reason", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withJS(cmd.Context(), "dead", func(ctx context.Context, js jetstream.JetStream) error {
				letters, err := deadLetters(ctx, js, stage)
				if err != nil {
					return err
				}
				return listDead(cmd.OutOrStdout(), letters, time.Now())
			})
		},
	}
	show := &cobra.Command{
		Use: "show N", Short: "Print dead letter N (its stream sequence) in full", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq(args[0])
			if err != nil {
				return err
			}
			return withJS(cmd.Context(), "dead", func(ctx context.Context, js jetstream.JetStream) error {
				d, err := deadLetter(ctx, js, seq)
				if err != nil {
					return err
				}
				return printEvent(cmd.OutOrStdout(), d.Event, false)
			})
		},
	}
	retry := &cobra.Command{
		Use: "retry N|--all [--stage S]", Short: "Re-publish dead letters' original events so their stage tries again",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usagef("give one dead letter's sequence N, or --all")
			}
			return withJS(cmd.Context(), "dead", func(ctx context.Context, js jetstream.JetStream) error {
				var letters []deadEvent
				if all {
					var err error
					if letters, err = deadLetters(ctx, js, stage); err != nil {
						return err
					}
				} else {
					seq, err := parseSeq(args[0])
					if err != nil {
						return err
					}
					d, err := deadLetter(ctx, js, seq)
					if err != nil {
						return err
					}
					letters = append(letters, d)
				}
				return retryDead(ctx, js, letters, cmd.OutOrStdout())
			})
		},
	}
	purge := &cobra.Command{
		Use: "purge [--stage S]", Short: "Delete dead letters (all, or one stage's)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withJS(cmd.Context(), "dead", func(ctx context.Context, js jetstream.JetStream) error {
				n, err := purgeDead(ctx, js, stage)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "purged %d dead letter(s)\n", n)
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{ls, retry, purge} {
		c.Flags().StringVar(&stage, "stage", "", "only this stage's dead letters: "+history.DeadSources())
	}
	retry.Flags().BoolVar(&all, "all", false, "retry every dead letter (of --stage, if given)")
	dead.AddCommand(ls, show, retry, purge)
	root.AddCommand(dead)
}

// withJS connects to the running deployment and runs f with a bounded context.
func withJS(ctx context.Context, name string, f func(context.Context, jetstream.JetStream) error) error {
	nc, err := connectRunning(name)
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
	return bounded(ctx, func(ctx context.Context) error { return f(ctx, js) })
}

func parseSeq(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, usagef("%q is not a dead letter's sequence number (see `%s`)", s, hint(clientServer(), "dead ls"))
	}
	return n, nil
}

// deadEvent is a stored dead letter with its headers decoded.
type deadEvent = history.DeadLetter

// deadLetters reads the dead letters of one stage (or all), oldest first.
func deadLetters(ctx context.Context, js jetstream.JetStream, stage string) ([]deadEvent, error) {
	return history.DeadLetters(ctx, js, stage)
}

// deadLetter reads one dead letter by stream sequence.
func deadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (deadEvent, error) {
	d, err := history.GetDeadLetter(ctx, js, seq)
	if errors.Is(err, history.ErrNotStored) {
		return d, fmt.Errorf("%w: see `%s`", err, hint(clientServer(), "dead ls"))
	}
	return d, err
}

func listDead(w io.Writer, letters []deadEvent, now time.Time) error {
	if len(letters) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAGE\tSTAGE\tSUBJECT\tDELIVERIES\tREASON")
	for _, d := range letters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", d.Seq, now.Sub(d.Time).Round(time.Second), d.FromStage, d.Original, d.Deliveries, oneLine(d.Reason, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nShow one with: %s\nRe-drive it with: %s (or --all)\n", hint(clientServer(), "dead show SEQ"), hint(clientServer(), "dead retry SEQ"))
	return err
}

// oneLine keeps the first line of s, cut to n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// retryDead re-publishes each dead letter and deletes it once JetStream has
// accepted the retry: a refused publish leaves it in place to retry later.
func retryDead(ctx context.Context, js jetstream.JetStream, letters []deadEvent, w io.Writer) error {
	if len(letters) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	var failed int
	for _, d := range letters {
		retried, err := history.Retry(ctx, js, d)
		if !retried {
			failed++
			fmt.Fprintf(w, "%d  %s  NOT retried: %v\n", d.Seq, d.Original, err)
			continue
		}
		if err != nil {
			fmt.Fprintf(w, "%d  %s  %v\n", d.Seq, d.Original, err)
			continue
		}
		fmt.Fprintf(w, "%d  %s  retried (turn %s; its new completion will be the turn's last: %s)\n",
			d.Seq, d.Original, d.Turn, hint(clientServer(), "events --conversation", d.Conversation()))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letter(s) not retried", failed, len(letters))
	}
	return nil
}

// purgeDead deletes the dead letters of one stage, or all.
func purgeDead(ctx context.Context, js jetstream.JetStream, stage string) (uint64, error) {
	return history.PurgeDead(ctx, js, stage)
}
