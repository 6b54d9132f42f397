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
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/contextblock"
	"github.com/aptix-dev/aptix/services/envelope/request"
	envelopestage "github.com/aptix-dev/aptix/services/envelope/stage"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	llmstage "github.com/aptix-dev/aptix/services/llmcaller/stage"
	mapperstage "github.com/aptix-dev/aptix/services/mapper/stage"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
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
	Stream     pipeline.StreamConfig
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
	if cfg.Stream == (pipeline.StreamConfig{}) {
		cfg.Stream = streams
	}
	cfg.Stream.Duplicates = cmp.Or(cfg.Stream.Duplicates, streams.Duplicates)
	cfg.Subscriber.MaxAckPending = cmp.Or(cfg.Subscriber.MaxAckPending, subs.MaxAckPending)
	cfg.Subscriber.MaxDeliver = cmp.Or(cfg.Subscriber.MaxDeliver, subs.MaxDeliver)
	cfg.Subscriber.AckWait = cmp.Or(cfg.Subscriber.AckWait, subs.AckWait)
	if _, err := pipeline.EnsureStream(ctx, js, cfg.Stream); err != nil {
		return err
	}
	convs, err := pipeline.OpenConversations(ctx, js, cfg.Stream.Replicas)
	if err != nil {
		return err
	}
	results, err := caller.NewKVResultStore(ctx, js)
	if err != nil {
		return err
	}
	history, err := caller.NewKVHistoryStore(ctx, js)
	if err != nil {
		return err
	}
	c := caller.New(cfg.Profiles, caller.Options{Results: results, History: history, HTTPClient: cfg.HTTPClient, Logger: cfg.Logger, ForgetConversations: caller.ForgetFromEnv(),
		Hop: pipeline.DeploymentMark(ctx, js)})
	cancels, err := pipeline.OpenCancels(ctx, js, cfg.Stream.Replicas)
	if err != nil {
		return err
	}
	defer cancels.Close()

	usage, err := pipeline.OpenUsage(ctx, js, cfg.Stream.Replicas)
	if err != nil {
		return err
	}
	if selected(cfg.Only, "mapper") {
		// The mapper's process folds turns into the usage totals.
		foldCtx, stopFold := context.WithCancel(context.WithoutCancel(ctx))
		folded := make(chan struct{})
		go func() { defer close(folded); _ = usage.Fold(foldCtx, cfg.Logger) }()
		defer func() { stopFold(); <-folded }()
	}

	runner, mcpOpts, closeTools, err := toolLoop(ctx, js, nc, cfg, cancels)
	if err != nil {
		return err
	}
	defer closeTools()

	mapper := &mapperstage.Mapper{JS: js, Conversations: convs, Usage: usage}
	if cfg.Mapper != nil {
		cfg.Mapper(mapper)
	}
	stages := []pipeline.Stage{
		(&retrieverstage.Retriever{Searcher: cfg.Searcher}).Stage(),
		(&envelopestage.Envelope{Profiles: cfg.Profiles, Contexts: cfg.Contexts, Conversations: convs, Budget: cfg.Budget, MCP: mcpOpts}).Stage(),
		(&llmstage.LLMCaller{Caller: c, NC: nc, JS: js, Cancels: cancels, Budgets: usage}).Stage(),
		mapper.Stage(),
		runner.Stage(),
	}
	// Each stage runs on its own context, so a stop can go in pipeline
	// order (drainInOrder); a stage that fails stops them all at once.
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	var readies []chan struct{}
	var running []*runningStage
	for _, st := range stages {
		if !selected(cfg.Only, st.Name) {
			continue
		}
		r := make(chan struct{})
		readies = append(readies, r)
		// The mapper, where turns end, keeps history within its limits.
		o := pipeline.Options{Stream: cfg.Stream, Subscriber: cfg.Subscriber, Logger: cfg.Logger, Ready: r, Trim: st.Name == "mapper"}
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

// stopOrder groups the stages in the order they stop: the LLM caller and
// the toolrunner feed each other, so they stop together.
var stopOrder = [][]string{{"retriever"}, {"envelope"}, {"llmcaller", "toolrunner"}, {"mapper"}}

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
		c, err := js.Consumer(ctx, contracts.StreamOf(rs.in), pipeline.Durable(rs.name))
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

// toolLoop builds the toolrunner stage and the envelope's tool loop options.
func toolLoop(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, cfg Config, cancels *pipeline.Cancels) (*toolstage.Runner, request.MCPOptions, func(), error) {
	var o request.MCPOptions
	if cfg.MCP != nil {
		o = *cfg.MCP
	} else {
		var err error
		if o, err = request.MCPOptionsFromEnv(); err != nil {
			return nil, o, nil, err
		}
	}
	closeTools := func() {}
	tools := cfg.Tools
	if tools == nil {
		mc, err := mcp.ConfigFromEnv()
		if err != nil {
			return nil, o, nil, err
		}
		reg := mcp.NewRegistry(mc, mcp.Options{Logger: cfg.Logger})
		tools, closeTools = reg, func() { _ = reg.Close() }
	}
	timeout := cfg.ToolTimeout
	if timeout == 0 {
		var err error
		if timeout, err = toolstage.TimeoutFromEnv(); err != nil {
			return nil, o, nil, err
		}
	}
	results, err := toolstage.OpenResults(ctx, js, cfg.Stream.Replicas)
	if err != nil {
		return nil, o, nil, err
	}
	return &toolstage.Runner{Tools: tools, Results: results, Timeout: timeout, Cancels: cancels, NC: nc, Logger: cfg.Logger,
		URLTools: toolstage.URLRegistries(cfg.Logger)}, o, closeTools, nil
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
