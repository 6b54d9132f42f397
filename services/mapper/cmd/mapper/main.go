// Command mapper runs the mapper stage: aptix.responded → aptix.completed
// (AGN-004). Configured from the environment: APTIX_NATS_URL, APTIX_NATS_CREDS.
package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/mapper/stage"
)

func main() {
	pipeline.Main("mapper", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream, log *slog.Logger) (pipeline.Stage, error) {
		convs, err := pipeline.OpenConversations(ctx, js, pipeline.ReplicasFromEnv())
		if err != nil {
			return pipeline.Stage{}, err
		}
		usage, err := pipeline.OpenUsage(ctx, js, pipeline.ReplicasFromEnv())
		if err != nil {
			return pipeline.Stage{}, err
		}
		// Folds completed turns into the usage totals while the stage runs
		// (docs/usage-and-budgets.md); replicas share its one consumer.
		go func() { _ = usage.Fold(ctx, log) }()
		return (&stage.Mapper{JS: js, Conversations: convs, Usage: usage}).Stage(), nil
	})
}
