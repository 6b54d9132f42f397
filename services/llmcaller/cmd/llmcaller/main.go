// Command llmcaller runs the LLM call stage: aptix.enveloped → aptix.responded.
// Configured from the environment: APTIX_NATS_URL, APTIX_NATS_CREDS,
// APTIX_PROFILES (profiles file) and the API key variables the profiles name.
package main

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

func main() {
	pipeline.Main("llmcaller", func(ctx context.Context, d pipeline.Deps) (pipeline.Stage, func(), error) {
		return stage.FromEnv(ctx, d, stage.Options{})
	})
}
