package stage

import (
	"context"
	"sync"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// Options are what a composition root chooses for the mapper.
type Options struct {
	// Adjust, when set, changes the mapper before it runs (tests slow or
	// fail its writes by wrapping its stores).
	Adjust func(*Mapper)
}

// FromEnv builds the mapper stage with its conversations bucket and the
// usage accounting, and starts folding completed turns into the usage
// totals (docs/usage-and-budgets.md; replicas share the fold's one
// consumer). Every composition root (the binary, the in-process stack)
// calls it. The fold outlives the build's context: close stops it, and
// returns once it has, so it runs until the stage has drained.
func FromEnv(ctx context.Context, d pipeline.Deps, o Options) (pipeline.Stage, func(), error) {
	convs, err := store.OpenConversations(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	usage, err := store.OpenUsage(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	m := &Mapper{JS: d.JS, Conversations: convs, Usage: usage}
	if o.Adjust != nil {
		o.Adjust(m)
	}
	log := d.Log
	foldCtx, stopFold := context.WithCancel(context.WithoutCancel(ctx))
	folded := make(chan struct{})
	go func() {
		defer close(folded)
		if err := usage.Fold(foldCtx, log); err != nil && foldCtx.Err() == nil && log != nil {
			log.Warn("usage fold stopped", "err", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { stopFold(); <-folded }) }
	return m.Stage(), stop, nil
}
