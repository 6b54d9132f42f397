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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
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
				return printEvent(cmd.OutOrStdout(), d.storedEvent, false)
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
		c.Flags().StringVar(&stage, "stage", "", "only this stage's dead letters: retriever, envelope, llmcaller, toolrunner, mapper")
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
type deadEvent struct {
	storedEvent
	Reason, FromStage, Original string
	Deliveries                  int
}

func deadFilter(stage string) (string, error) {
	if stage == "" {
		return contracts.DeadPrefix + ".>", nil
	}
	for _, st := range pipeline.Stages {
		if st.Name == stage {
			return contracts.DeadSubject(stage), nil
		}
	}
	return "", usagef("--stage %q: want retriever, envelope, llmcaller, toolrunner or mapper", stage)
}

// deadLetters reads the dead letters of one stage (or all), oldest first.
func deadLetters(ctx context.Context, js jetstream.JetStream, stage string) ([]deadEvent, error) {
	filter, err := deadFilter(stage)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filter, err)
	}
	var out []deadEvent
	for read := uint64(0); read < total; read++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				break // purged or trimmed while reading
			}
			return nil, fmt.Errorf("read %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		out = append(out, toDead(md.Sequence.Stream, md.Timestamp, m.Subject(), m.Headers(), m.Data()))
		if md.NumPending == 0 {
			break
		}
	}
	return out, nil
}

// deadLetter reads one dead letter by stream sequence.
func deadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (deadEvent, error) {
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return deadEvent{}, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	m, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return deadEvent{}, fmt.Errorf("no event at sequence %d (retried, purged or trimmed?): see `%s`", seq, hint(clientServer(), "dead ls"))
	}
	if err != nil {
		return deadEvent{}, fmt.Errorf("read sequence %d: %w", seq, err)
	}
	if !strings.HasPrefix(m.Subject, contracts.DeadPrefix+".") {
		return deadEvent{}, fmt.Errorf("sequence %d is %s, not a dead letter: see `%s`", seq, m.Subject, hint(clientServer(), "dead ls"))
	}
	return toDead(m.Sequence, m.Time, m.Subject, m.Header, m.Data), nil
}

func toDead(seq uint64, at time.Time, subject string, h nats.Header, data []byte) deadEvent {
	d := deadEvent{storedEvent: storedEvent{Seq: seq, Time: at, Subject: subject, Header: h, Data: data},
		Reason: h.Get(contracts.HeaderDeadReason), FromStage: h.Get(contracts.HeaderDeadStage), Original: h.Get(contracts.HeaderDeadSubject)}
	d.Deliveries, _ = strconv.Atoi(h.Get(contracts.HeaderDeadDeliveries))
	if stage, _, turn, ok := contracts.ParseSubject(d.Original); ok {
		d.Stage, d.Turn = stage, turn
	}
	return d
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

// retryMsg is the original event of a dead letter, ready to publish again:
// its payload and headers (the claim header included, so a claim-checked
// event is read from the same object), without the dead-letter headers and
// the first publish's JetStream directives (pipeline.PublishDirective), and
// with a fresh Nats-Msg-Id and the redrive mark, so neither this event nor
// the events the retried turn produces are de-duplicated against the first run.
func retryMsg(d deadEvent) (*nats.Msg, error) {
	stage, conv, turn, ok := contracts.ParseSubject(d.Original)
	if !ok || !contracts.IsToken(conv) || !contracts.IsToken(turn) {
		return nil, fmt.Errorf("dead letter %d came from %q, which is no turn's subject: it cannot be retried (purge it)", d.Seq, d.Original)
	}
	h := nats.Header{}
	for k, v := range d.Header {
		switch k {
		case contracts.HeaderDeadReason, contracts.HeaderDeadStage, contracts.HeaderDeadSubject, contracts.HeaderDeadDeliveries:
			continue
		}
		if pipeline.PublishDirective(k) {
			// Nats-Msg-Id is set below; an expectation the consumed event
			// carried (dead letters stored before the stage dropped them
			// kept it) would refuse the retry.
			continue
		}
		h[k] = v
	}
	mark := strconv.FormatUint(d.Seq, 10)
	h.Set(pipeline.HeaderRedrive, mark)
	h.Set(contracts.HeaderMsgID, contracts.MsgID(turn, stage)+".redrive-"+mark)
	return &nats.Msg{Subject: d.Original, Header: h, Data: d.Data}, nil
}

// retryDead re-publishes each dead letter and deletes it once JetStream has
// accepted the retry: a refused publish leaves it in place to retry later.
func retryDead(ctx context.Context, js jetstream.JetStream, letters []deadEvent, w io.Writer) error {
	if len(letters) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	var failed int
	for _, d := range letters {
		m, err := retryMsg(d)
		if err == nil {
			_, err = js.PublishMsg(ctx, m)
			if err != nil {
				err = fmt.Errorf("publish %s: %w", m.Subject, err)
			}
		}
		if err != nil {
			failed++
			fmt.Fprintf(w, "%d  %s  NOT retried: %v\n", d.Seq, d.Original, err)
			continue
		}
		if err := stream.DeleteMsg(ctx, d.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			fmt.Fprintf(w, "%d  %s  retried, but the dead letter was not deleted: %v\n", d.Seq, d.Original, err)
			continue
		}
		fmt.Fprintf(w, "%d  %s  retried (turn %s; its new completion will be the turn's last: %s)\n",
			d.Seq, d.Original, d.Turn, hint(clientServer(), "events --conversation", conversationOf(d.Original)))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letter(s) not retried", failed, len(letters))
	}
	return nil
}

func conversationOf(subject string) string {
	_, conv, _, _ := contracts.ParseSubject(subject)
	return conv
}

// purgeDead deletes the dead letters of one stage, or all.
func purgeDead(ctx context.Context, js jetstream.JetStream, stage string) (uint64, error) {
	filter, err := deadFilter(stage)
	if err != nil {
		return 0, err
	}
	stream, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
		return 0, fmt.Errorf("purge %s: %w", filter, err)
	}
	return n, nil
}
