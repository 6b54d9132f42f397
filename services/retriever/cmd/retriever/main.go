// Command retriever runs the retrieval stage: aptix.requested →
// aptix.retrieved. It keeps its own bleve index under APTIX_DATA_DIR (give
// each replica its own), built from and following the JetStream chunk store.
package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
	"github.com/aptix-dev/aptix/services/retriever/stage"
)

func main() {
	// The previous build's index: pipeline.Main builds the stage again on a
	// new connection when NATS closed the old one for good, and the local
	// index (a file lock) must be released first.
	var prev *retrieval.Index
	pipeline.Main("retriever", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream, log *slog.Logger) (pipeline.Stage, error) {
		if prev != nil {
			_ = prev.Close()
			prev = nil
		}
		dir := os.Getenv("APTIX_DATA_DIR")
		if dir == "" {
			host, _ := os.Hostname()
			dir = filepath.Join(os.TempDir(), "aptix-retriever-"+host)
		}
		idx, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: dir, Logger: log})
		if err != nil {
			return pipeline.Stage{}, err
		}
		// The index is not closed at exit: every batch is applied with the
		// per-file hashes that record it, so a replica that stops mid-way
		// re-applies what it lost from the bucket when it starts again.
		prev = idx
		log.Info("local index", "dir", dir)
		return (&stage.Retriever{Searcher: idx}).Stage(), nil
	})
}
