package stage

import (
	"context"
	"os"
	"path/filepath"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// EnvDataDir is where the binary keeps its local index (give each replica
// its own); default <tmp>/aptix-retriever-<host>.
const EnvDataDir = "APTIX_DATA_DIR"

// Options are what a composition root chooses for the retriever.
type Options struct {
	// Searcher retrieves RAG context. Nil opens the local bleve index under
	// APTIX_DATA_DIR, built from and following the JetStream chunk store,
	// unless NoIndex is set: then turns run without retrieval.
	Searcher Searcher
	NoIndex  bool
}

// FromEnv builds the retriever stage; every composition root (the binary,
// the in-process stack) calls it. close releases the index it opened.
func FromEnv(ctx context.Context, d pipeline.Deps, o Options) (pipeline.Stage, func(), error) {
	closeIndex := func() {}
	if o.Searcher == nil && !o.NoIndex {
		dir := os.Getenv(EnvDataDir)
		if dir == "" {
			host, _ := os.Hostname()
			dir = filepath.Join(os.TempDir(), "aptix-retriever-"+host)
		}
		// Closed when the stage stops; a replica that stops mid-batch
		// loses nothing either way: every batch is applied with the
		// per-file hashes that record it, so a restart re-applies what
		// the local index lacks from the bucket.
		idx, err := retrieval.Open(ctx, d.JS, retrieval.Options{DataDir: dir, Logger: d.Log})
		if err != nil {
			return pipeline.Stage{}, nil, err
		}
		if d.Log != nil {
			d.Log.Info("local index", "dir", dir)
		}
		o.Searcher, closeIndex = idx, func() { _ = idx.Close() }
	}
	return (&Retriever{Searcher: o.Searcher}).Stage(), closeIndex, nil
}
