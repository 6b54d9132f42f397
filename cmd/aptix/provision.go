package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// provision creates the JetStream objects ahead of the services, for
// operators who do not let services create them (every stage also creates
// them idempotently at start, with the same configuration).
func init() {
	var (
		replicas int
		dryRun   bool
		dir      string
		sc       pipeline.SubscriberConfig
	)
	cmd := &cobra.Command{
		Use:   "provision [--replicas N] [--dry-run]",
		Short: "Create or update the APTIX_QUEUE and APTIX streams (migrating a single-stream deployment), the stage consumers and the KV stores",
		Example: `  aptix provision --nats nats://nats-1:4222 --replicas 3
  aptix provision --dry-run --replicas 3 > aptix-jetstream.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stream, err := layout.StreamConfigFromEnv()
			if err != nil {
				return usagef("%w", err)
			}
			stream.Replicas = replicas
			if dir != "" {
				return writeDefinitions(dir, stream, sc)
			}
			if dryRun {
				plan := map[string]any{"stream": stream.JetStreamConfig(), "queue": stream.QueueJetStreamConfig(), "usage": store.UsageStreamConfig(replicas)}
				// The consumers a provision creates: one per declared stage
				// and the usage fold's.
				consumers := map[string]jetstream.ConsumerConfig{store.UsageFolder: store.UsageConsumerConfig()}
				for _, st := range layout.Stages {
					consumers[layout.Durable(st.Name)] = pipeline.ConsumerConfig(st.Name, st.In, sc)
				}
				plan["consumers"] = consumers
				return writeJSON(cmd.OutOrStdout(), plan)
			}
			nc, err := connectRunning("provision")
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			// Named as they are made: the stages' consumers from the
			// declared topology, then the usage fold's.
			consumers, err := pipeline.ProvisionStages(ctx, js, stream, sc)
			if err != nil {
				return err
			}
			// Each store is named in the output by the step that made it.
			var stores []string
			for _, step := range []struct {
				names []string
				open  func() error
			}{
				{[]string{store.ConversationsBucket}, func() error { _, err := store.OpenConversations(ctx, js, replicas); return err }},
				{[]string{caller.ResultsBucket}, func() error { _, err := caller.NewKVResultStore(ctx, js); return err }},
				{[]string{store.UsageBucket}, func() error {
					if _, err := store.OpenUsage(ctx, js, replicas); err != nil {
						return err
					}
					consumers = append(consumers, store.UsageFolder)
					return nil
				}},
				{[]string{caller.HistoryKVBucket, caller.HistoryBucket + " (object store)"}, func() error { _, err := caller.NewKVHistoryStore(ctx, js); return err }},
			} {
				if err := step.open(); err != nil {
					return err
				}
				stores = append(stores, step.names...)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "provisioned on %s: streams APTIX_QUEUE, APTIX and %s (replicas %d), consumers %s; stores %s\n",
				nc.ConnectedUrl(), store.UsageStream, max(replicas, 1), strings.Join(consumers, ", "), strings.Join(stores, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&replicas, "replicas", 1, "stream replicas (3 on a three-node cluster)")
	f.BoolVar(&dryRun, "dry-run", false, "print the stream and consumer configurations instead of applying them")
	f.StringVar(&dir, "write-definitions", "", "write the stream and consumer definitions into `DIR` as files for nats stream add --config and nats consumer add --config, instead of applying them")
	f.IntVar(&sc.MaxDeliver, "max-deliver", 0, "deliveries before an event is dead-lettered (default 5)")
	f.IntVar(&sc.MaxAckPending, "max-ack-pending", 0, "events in flight per stage, across its replicas (default 256)")
	f.DurationVar(&sc.AckWait, "ack-wait", 0, "redelivery timeout of an unacknowledged event (default 30s)")
	root.AddCommand(cmd)
}

// writeDefinitions writes APTIX_QUEUE.stream.json, APTIX.stream.json and one
// <durable>.consumer.json per stage: what an operator applies with the nats
// CLI (the queue first; the retriever's consumer is on the queue). They are generated
// from the same code the stages run, and a test keeps deploy/nats's copies
// in step.
func writeDefinitions(dir string, stream layout.StreamConfig, sc pipeline.SubscriberConfig) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]any{
		contracts.StreamName + ".stream.json":      stream.JetStreamConfig(),
		contracts.QueueStreamName + ".stream.json": stream.QueueJetStreamConfig(),
		store.UsageStream + ".stream.json":         store.UsageStreamConfig(stream.Replicas),
		store.UsageFolder + ".consumer.json":       store.UsageConsumerConfig(),
	}
	for _, st := range layout.Stages {
		files[layout.Durable(st.Name)+".consumer.json"] = pipeline.ConsumerConfig(st.Name, st.In, sc)
	}
	for name, v := range files {
		var b bytes.Buffer
		if err := writeJSON(&b, v); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
