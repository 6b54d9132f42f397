// Command mapper runs the mapper stage: aptix.responded → aptix.completed
// (AGN-004). Configured from the environment: APTIX_NATS_URL, APTIX_NATS_CREDS.
package main

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/mapper/stage"
)

func main() {
	pipeline.Main("mapper", func(ctx context.Context, d pipeline.Deps) (pipeline.Stage, func(), error) {
		return stage.FromEnv(ctx, d, stage.Options{})
	})
}
