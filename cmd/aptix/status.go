package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// status shows what an operator needs to judge capacity: the queue and the
// APTIX stream against their limits, every stage's backlog, and the stores.
func init() {
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status [--watch 2s]",
		Short: "Show the queue, the APTIX stream and the stages' backlogs against their limits",
		Long: "status reads the running deployment's streams and consumers. The limits it shows are this\n" +
			"process's configuration (APTIX_QUEUE_MAX_BYTES, APTIX_WORK_MAX_BYTES, APTIX_HISTORY_MAX_BYTES,\n" +
			"APTIX_HISTORY_MAX_AGE, APTIX_COMPLETION_GRACE) next to what the server enforces.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := layout.StreamConfigFromEnv()
			if err != nil {
				return usagef("%w", err)
			}
			nc, err := connectRunning("status")
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			if watch > 0 {
				return watchStatus(cmd.Context(), cmd.OutOrStdout(), js, cfg.Limits(), watch) // statusextra.go
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			return printStatus(ctx, cmd.OutOrStdout(), js, cfg.Limits())
		},
	}
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh the screen every interval (e.g. --watch 2s) until Ctrl-C")
	root.AddCommand(cmd)
}

func printStatus(ctx context.Context, out io.Writer, js jetstream.JetStream, lim layout.StreamConfig) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STREAM\tEVENTS\tSIZE\tSERVER CAP\tROLE")
	for _, name := range []string{contracts.QueueStreamName, contracts.StreamName} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s (is the pipeline running on the new layout? `aptix provision` creates it): %w", name, err)
		}
		info := s.CachedInfo()
		msgs := info.State.Msgs
		role := "requests not yet taken by the retriever; full = clients refused"
		if name == contracts.QueueStreamName {
			if n, err := pipeline.QueuedRequests(ctx, s); err == nil {
				msgs = n
			}
		}
		if name == contracts.StreamName {
			role = fmt.Sprintf("work + history (history kept to %s and %s; completions at least %s)",
				layout.FormatBytes(lim.HistoryMaxBytes), lim.HistoryMaxAge, lim.CompletionGrace)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", name, msgs, layout.FormatBytes(int64(info.State.Bytes)),
			layout.FormatBytes(info.Config.MaxBytes), role)
	}
	fmt.Fprintln(w)
	replicas, _ := pipeline.MicroReplicas(js.Conn(), 300*time.Millisecond, 0)
	dead, _ := history.DeadCounts(ctx, js)
	stageServices := map[string]bool{}
	fmt.Fprintln(w, "STAGE\tREPLICAS\tCONSUMES\tWAITING\tIN FLIGHT\tREDELIVERED\tDEAD")
	for _, st := range layout.Stages {
		stageServices["aptix-"+st.Name] = true
		c, err := js.Consumer(ctx, contracts.StreamOf(st.In), layout.Durable(st.Name))
		if err != nil {
			fmt.Fprintf(w, "%s\t%d\t%s\t-\t-\t-\t%d (%v)\n", st.Name, replicas["aptix-"+st.Name], contracts.StageFilter(st.In), dead[st.Name], err)
			continue
		}
		ci := c.CachedInfo()
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\t%d\n", st.Name, replicas["aptix-"+st.Name], contracts.StageFilter(st.In), ci.NumPending, ci.NumAckPending, ci.NumRedelivered, dead[st.Name])
	}
	otherServices(w, replicas, stageServices)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "STORE\tENTRIES\tSIZE")
	for kv := range js.KeyValueStores(ctx).Status() {
		fmt.Fprintf(w, "kv %s\t%d\t%s\n", kv.Bucket(), kv.Values(), layout.FormatBytes(int64(kv.Bytes())))
	}
	for obs := range js.ObjectStores(ctx).Status() {
		fmt.Fprintf(w, "object %s\t-\t%s\n", obs.Bucket(), layout.FormatBytes(int64(obs.Size())))
	}
	return w.Flush()
}
