// Package stack runs all five Aptix stages in one process on one NATS
// connection: the all-in-one `aptix up`, the integration tests and the
// benchmarks use it, so they exercise exactly what the stage binaries run.
package stack

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/request"
	envelopestage "github.com/aptix-dev/aptix/services/envelope/stage"
	llmstage "github.com/aptix-dev/aptix/services/llmcaller/stage"
	mapperstage "github.com/aptix-dev/aptix/services/mapper/stage"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
	toolstage "github.com/aptix-dev/aptix/services/toolrunner/stage"
)

// Config is what the five stages need. Zero values take the defaults.
type Config struct {
	Profiles *profiles.Set
	// Searcher retrieves RAG context; nil runs turns without retrieval.
	Searcher retrieverstage.Searcher
	// Contexts are server-side ConversationContexts by id.
	Contexts map[string]contracts.ConversationContext
	Budget   contextblock.Options
	// Stream and Subscriber are the limits and consumer settings; a zero
	// Stream (and each zero consumer setting) is read from the environment
	// as every stage binary reads it (pipeline.LimitsFromEnv:
	// APTIX_QUEUE_MAX_BYTES, APTIX_WORK_MAX_BYTES, APTIX_HISTORY_MAX_BYTES,
	// APTIX_MAX_ACK_PENDING, ...).
	Stream     layout.StreamConfig
	Subscriber pipeline.SubscriberConfig
	HTTPClient *http.Client
	Logger     *slog.Logger
	// BeforePublish hooks, by stage name (tests crash stages with them).
	BeforePublish map[string]func(*contracts.Turn) error
	// Only runs just these stages (by name); empty runs all five.
	Only []string
	// Tools are the MCP servers of the server-side tool loop; nil loads
	// APTIX_MCP_CONFIG (none configured: a request naming one is refused).
	Tools toolstage.Tools
	// ToolTimeout bounds each tool call; zero reads APTIX_TOOL_TIMEOUT (45s).
	ToolTimeout time.Duration
	// MCP says how requests enable the tool loop; nil reads the environment.
	MCP *request.MCPOptions
	// Mapper, when set, adjusts the mapper before it runs (tests slow or
	// fail its writes by wrapping its stores).
	Mapper func(*mapperstage.Mapper)
}

// Run runs the stages until ctx ends, then drains them upstream first
// (drainInOrder). ready (if not nil) is closed once every stage consumes.
func Run(ctx context.Context, nc *nats.Conn, cfg Config, ready chan<- struct{}) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if cfg.Profiles == nil {
		if cfg.Profiles, err = profiles.FromEnv(); err != nil {
			return err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The limits every stage binary applies (pipeline.LimitsFromEnv), where
	// the caller set none.
	streams, subs, err := pipeline.LimitsFromEnv()
	if err != nil {
		return err
	}
	if cfg.Stream == (layout.StreamConfig{}) {
		cfg.Stream = streams
	}
	cfg.Stream.Duplicates = cmp.Or(cfg.Stream.Duplicates, streams.Duplicates)
	cfg.Subscriber.MaxAckPending = cmp.Or(cfg.Subscriber.MaxAckPending, subs.MaxAckPending)
	cfg.Subscriber.MaxDeliver = cmp.Or(cfg.Subscriber.MaxDeliver, subs.MaxDeliver)
	cfg.Subscriber.AckWait = cmp.Or(cfg.Subscriber.AckWait, subs.AckWait)
	// The stream before any stage: the LLM caller's deployment mark is
	// derived from it, and every stage's consumer is created on it.
	if _, err := layout.EnsureStream(ctx, js, cfg.Stream); err != nil {
		return err
	}
	stages, closeStages, err := build(ctx, pipeline.Deps{NC: nc, JS: js, Log: cfg.Logger, Stream: cfg.Stream}, cfg)
	// What the constructors started (the usage fold, cancel watches, MCP
	// connections) stops once every stage has stopped.
	defer closeStages()
	if err != nil {
		return err
	}
	// Each stage runs on its own context, so a stop can go in pipeline
	// order (drainInOrder); a stage that fails stops them all at once.
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	var readies []chan struct{}
	var running []*runningStage
	for _, st := range stages {
		r := make(chan struct{})
		readies = append(readies, r)
		// The stage where turns end keeps history within its limits.
		o := pipeline.Options{Stream: cfg.Stream, Subscriber: cfg.Subscriber, Logger: cfg.Logger, Ready: r, Trim: layout.Trims(st.Name)}
		if hook := cfg.BeforePublish[st.Name]; hook != nil {
			o.BeforePublish = hook
		}
		sctx, cancel := context.WithCancel(gctx)
		rs := &runningStage{name: st.Name, in: st.In, cancel: cancel, done: make(chan struct{})}
		running = append(running, rs)
		g.Go(func() error {
			defer close(rs.done)
			if err := pipeline.Run(sctx, nc, st, o); err != nil {
				return fmt.Errorf("%s: %w", st.Name, err)
			}
			return nil
		})
	}
	if ready != nil {
		go func() {
			for _, r := range readies {
				select {
				case <-r:
				case <-gctx.Done():
					return
				}
			}
			close(ready)
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			drainInOrder(js, running, cfg.Subscriber.DrainTimeout, cfg.Logger)
		case <-gctx.Done(): // a stage failed: errgroup cancelled every stage
		}
	}()
	return g.Wait()
}

// runningStage is one stage Run is running.
type runningStage struct {
	name, in string
	cancel   context.CancelFunc
	done     chan struct{} // closed when its pipeline.Run returned
}

// stopOrder groups the stages in the order they stop, upstream first
// (layout.StopOrder): the LLM caller and the toolrunner feed each other, so
// they stop together.
var stopOrder = layout.StopOrder()

// drainInOrder stops the stages upstream first, so a turn in flight when
// the process is asked to stop still completes: the retriever stops taking
// new requests (they wait in the queue for the next start), then each later
// group stops once the groups before it are done and its own consumers have
// nothing left to handle. Waiting for that is bounded by drain (default
// 30 s) in all; past it the remaining groups stop at once, and what they had
// not handled stays in the stream for the next start. Every stage still
// finishes the events it holds (pipeline.Run's own drain).
func drainInOrder(js jetstream.JetStream, running []*runningStage, drain time.Duration, log *slog.Logger) {
	if drain <= 0 {
		drain = 30 * time.Second
	}
	deadline := time.Now().Add(drain)
	upstreamStopped := false
	for _, names := range stopOrder {
		var group []*runningStage
		for _, rs := range running {
			if slices.Contains(names, rs.name) {
				group = append(group, rs)
			}
		}
		if len(group) == 0 {
			continue
		}
		// A group whose upstream runs in another process has no reason
		// to wait for it.
		if upstreamStopped && !waitIdle(js, group, deadline) {
			log.Warn("stopping with events not yet handled; they are handled on the next start", "stages", names)
		}
		for _, rs := range group {
			rs.cancel()
		}
		for _, rs := range group {
			<-rs.done
		}
		upstreamStopped = true
	}
}

// waitIdle waits until the group's consumers have no event pending or
// unacknowledged, seen twice in a row (the LLM caller and the toolrunner
// hand turns to each other between two looks), or until deadline. Events
// held unacknowledged with no progress for stallAfter (none delivered,
// none acknowledged) count as idle too: they belong to a handler that
// finishes them as it stops (pipeline.Run's own drain) or to a connection
// that is gone (NATS closed it and `up` rebuilt on a new one), whose events
// nobody here can acknowledge before their ack wait ends.
func waitIdle(js jetstream.JetStream, group []*runningStage, deadline time.Time) bool {
	idleLooks := 0
	var last groupProgress
	lastChange := time.Now()
	for time.Now().Before(deadline) {
		p, ok := groupState(js, group, deadline)
		switch {
		case ok && p.pending == 0 && p.ackPending == 0:
			idleLooks++
		case ok && p.pending == 0 && p == last && time.Since(lastChange) >= stallAfter:
			return true
		default:
			idleLooks = 0
		}
		if idleLooks == 2 {
			return true
		}
		if p != last {
			last, lastChange = p, time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// stallAfter is how long unacknowledged events may show no progress before
// a stopping group stops waiting for them.
const stallAfter = 2 * time.Second

// groupProgress sums a group's consumers: what waits, what is held, and how
// far delivery and acknowledgement have come.
type groupProgress struct {
	pending, ackPending, delivered, acked uint64
}

func groupState(js jetstream.JetStream, group []*runningStage, deadline time.Time) (groupProgress, bool) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var p groupProgress
	for _, rs := range group {
		c, err := js.Consumer(ctx, contracts.StreamOf(rs.in), layout.Durable(rs.name))
		if err != nil {
			return p, false
		}
		info, err := c.Info(ctx)
		if err != nil {
			return p, false
		}
		p.pending += info.NumPending
		p.ackPending += uint64(info.NumAckPending)
		p.delivered += info.Delivered.Consumer
		p.acked += info.AckFloor.Consumer
	}
	return p, true
}

// build calls each selected stage's constructor, the one its binary calls
// too, in the order of the declared topology (layout.Stages). close
// releases what the built stages started, last built first.
func build(ctx context.Context, d pipeline.Deps, cfg Config) (stages []pipeline.Stage, close func(), err error) {
	constructors := map[string]func() (pipeline.Stage, func(), error){
		"retriever": func() (pipeline.Stage, func(), error) {
			// No searcher runs turns without retrieval: the stack never
			// opens an index of its own (`aptix up` passes its index).
			return retrieverstage.FromEnv(ctx, d, retrieverstage.Options{Searcher: cfg.Searcher, NoIndex: cfg.Searcher == nil})
		},
		"envelope": func() (pipeline.Stage, func(), error) {
			return envelopestage.FromEnv(ctx, d, envelopestage.Options{Profiles: cfg.Profiles, Contexts: cfg.Contexts, Budget: cfg.Budget, MCP: cfg.MCP})
		},
		"llmcaller": func() (pipeline.Stage, func(), error) {
			return llmstage.FromEnv(ctx, d, llmstage.Options{Profiles: cfg.Profiles, HTTPClient: cfg.HTTPClient})
		},
		"mapper": func() (pipeline.Stage, func(), error) {
			return mapperstage.FromEnv(ctx, d, mapperstage.Options{Adjust: cfg.Mapper})
		},
		"toolrunner": func() (pipeline.Stage, func(), error) {
			return toolstage.FromEnv(ctx, d, toolstage.Options{Tools: cfg.Tools, Timeout: cfg.ToolTimeout})
		},
	}
	var closers []func()
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for _, spec := range layout.Stages {
		if !selected(cfg.Only, spec.Name) {
			continue
		}
		construct, ok := constructors[spec.Name]
		if !ok {
			return nil, close, fmt.Errorf("stack: no constructor for the declared %s stage", spec.Name)
		}
		st, closeStage, err := construct()
		if err != nil {
			return nil, close, fmt.Errorf("%s: %w", spec.Name, err)
		}
		if closeStage != nil {
			closers = append(closers, closeStage)
		}
		stages = append(stages, st)
	}
	return stages, close, nil
}

func selected(only []string, name string) bool {
	if len(only) == 0 {
		return true
	}
	for _, o := range only {
		if o == name {
			return true
		}
	}
	return false
}
