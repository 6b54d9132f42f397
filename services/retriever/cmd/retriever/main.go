// Command retriever runs the retrieval stage: aptix.requested →
// aptix.retrieved. It keeps its own bleve index under APTIX_DATA_DIR (give
// each replica its own), built from and following the JetStream chunk store.
package main

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/retriever/stage"
)

func main() {
	pipeline.Main("retriever", func(ctx context.Context, d pipeline.Deps) (pipeline.Stage, func(), error) {
		return stage.FromEnv(ctx, d, stage.Options{})
	})
}
