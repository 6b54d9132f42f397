// Command llmcaller runs the LLM call stage: aptix.enveloped → aptix.responded.
// Configured from the environment: APTIX_NATS_URL, APTIX_NATS_CREDS,
// APTIX_PROFILES (profiles file) and the API key variables the profiles name.
package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

func main() {
	pipeline.Main("llmcaller", func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, log *slog.Logger) (pipeline.Stage, error) {
		set, err := profiles.FromEnv()
		if err != nil {
			return pipeline.Stage{}, err
		}
		results, err := caller.NewKVResultStore(ctx, js)
		if err != nil {
			return pipeline.Stage{}, err
		}
		history, err := caller.NewKVHistoryStore(ctx, js)
		if err != nil {
			return pipeline.Stage{}, err
		}
		sc, err := pipeline.StreamConfigFromEnv()
		if err != nil {
			return pipeline.Stage{}, err
		}
		// The stream first: the deployment mark the backend calls carry
		// (so the gateway can refuse a call to itself) is derived from it.
		if _, err := pipeline.EnsureStream(ctx, js, sc); err != nil {
			return pipeline.Stage{}, err
		}
		c := caller.New(set, caller.Options{Results: results, History: history, Logger: log, ForgetConversations: caller.ForgetFromEnv(),
			Hop: pipeline.DeploymentMark(ctx, js)})
		cancels, err := pipeline.OpenCancels(ctx, js, sc.Replicas)
		if err != nil {
			return pipeline.Stage{}, err
		}
		usage, err := pipeline.OpenUsage(ctx, js, sc.Replicas)
		if err != nil {
			return pipeline.Stage{}, err
		}
		return (&stage.LLMCaller{Caller: c, NC: nc, JS: js, Cancels: cancels, Budgets: usage}).Stage(), nil
	})
}
