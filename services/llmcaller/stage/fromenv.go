package stage

import (
	"context"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// Options are what a composition root chooses for the LLM caller.
type Options struct {
	Profiles *profiles.Set // nil: APTIX_PROFILES
	// HTTPClient carries the backend calls; nil is the caller's pooled client.
	HTTPClient *http.Client
}

// FromEnv builds the LLM caller stage: its result and history stores, the
// reader of the conversation events recovery follows (EventCalls), the
// stream (whose deployment mark every backend call carries, so the gateway
// can refuse a call to itself), the cancel records and the usage totals
// budgets are checked against. Every composition root (the binary, the
// in-process stack) calls it; close stops the cancel watch.
func FromEnv(ctx context.Context, d pipeline.Deps, o Options) (pipeline.Stage, func(), error) {
	var err error
	if o.Profiles == nil {
		if o.Profiles, err = profiles.FromEnv(); err != nil {
			return pipeline.Stage{}, nil, err
		}
	}
	// The stream first: the deployment mark is derived from it.
	if _, err := layout.EnsureStream(ctx, d.JS, d.Stream); err != nil {
		return pipeline.Stage{}, nil, err
	}
	results, err := caller.NewKVResultStore(ctx, d.JS)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	history, err := caller.NewKVHistoryStore(ctx, d.JS)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	// Recovery reads the conversation's events (EventCalls); the history
	// store is written only for backends without previous_response_id, and
	// read as well for the records earlier releases kept for every turn.
	c := caller.New(o.Profiles, caller.Options{Results: results, History: history, Calls: EventCalls{JS: d.JS},
		HTTPClient: o.HTTPClient, Logger: d.Log, Hop: pipeline.DeploymentMark(ctx, d.JS)})
	usage, err := store.OpenUsage(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	cancels, err := store.OpenCancels(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	l := &LLMCaller{Caller: c, NC: d.NC, JS: d.JS, Cancels: cancels, Budgets: usage}
	return l.Stage(), cancels.Close, nil
}
