// Package bench measures what Aptix adds over a direct model call and over a
// bare JetStream chain of the same shape, in one process run, so the figures
// are ratios taken on the same machine at the same moment (`make bench`).
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/fsync"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// Options size the run. Zero values take the defaults of `make bench`.
type Options struct {
	// Turns at concurrency 1 (latency) and at 64/256 (throughput).
	LatencyTurns, ThroughputTurns int
	// SoakTurns (default 10,000) are all sent at once against a sandbox
	// with SoakLatency (default 1 s), in a child process.
	SoakTurns   int
	SoakLatency time.Duration
	// ToolLoops are the client-side tool loops of each transport at
	// concurrency 1 (WebSocket vs HTTP+SSE); ToolLoopReps the interleaved
	// phases at ToolLoopConcurrency; ToolLoopRounds the rounds of a loop.
	ToolLoops, ToolLoopReps, ToolLoopConcurrency, ToolLoopRounds int
	// SplitTurns (default 100) are the sequential turns of each path whose
	// writes are split at the answer, each between snapshots of every
	// stream, outside the timed runs.
	SplitTurns int
	// Quick measures only the floors and the bus path (no gateway, tool
	// loop or soak): for interleaved A/B runs of two builds.
	Quick bool
	// QuickGateway adds the gateway rows to a Quick run (A/B of the
	// gateway's own cost).
	QuickGateway bool
	// Sync is the embedded server's fsync policy: the zero value is the
	// one `aptix up` ships (fsync.Shipped); another is a run that is not
	// what a user of `aptix up` gets and is labelled so.
	Sync fsync.Policy
	// Progress receives one line per phase.
	Progress func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.LatencyTurns == 0 {
		o.LatencyTurns = 2000
	}
	if o.ThroughputTurns == 0 {
		o.ThroughputTurns = 6000
	}
	if o.SoakTurns == 0 {
		o.SoakTurns = 10000
	}
	if o.SoakLatency == 0 {
		o.SoakLatency = time.Second
	}
	if o.ToolLoops == 0 {
		o.ToolLoops = 30
	}
	if o.ToolLoopReps == 0 {
		o.ToolLoopReps = 3
	}
	if o.ToolLoopConcurrency == 0 {
		o.ToolLoopConcurrency = 64
	}
	if o.ToolLoopRounds == 0 {
		o.ToolLoopRounds = 20
	}
	if o.SplitTurns == 0 {
		o.SplitTurns = 100
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	return o
}

// Report holds every figure; it is also written as JSON.
type Report struct {
	When       time.Time `json:"when"`
	GoVersion  string    `json:"goVersion"`
	CPUs       int       `json:"cpus"`
	Storage    string    `json:"storage"`
	EventBytes [5]int    `json:"eventBytes"`

	Direct Load         `json:"direct"`
	Chain  map[int]Load `json:"chain"`
	Aptix  map[int]Load `json:"aptix"`
	// AptixChat is the same turn through a Chat Completions backend (the
	// same sandbox, its chat endpoint), at concurrency 1.
	AptixChat map[int]Load `json:"aptixChat,omitempty"`
	// Gateway is the same turn through the HTTP gateway: openai-go → POST
	// /v1/responses → pipeline → sandbox, on the same pipeline as Aptix.
	Gateway map[int]Load `json:"gateway"`
	// HTTPFloor is the gateway's request and response over loopback HTTP
	// with openai-go, answered by a canned handler: what the gateway path
	// costs before any of the gateway's own work.
	HTTPFloor map[int]Load `json:"httpFloor,omitempty"`
	// ToolLoop is a 20-round client-side tool loop over WebSocket mode and
	// over HTTP+SSE on that gateway.
	ToolLoop   ToolLoop `json:"toolLoop"`
	PeakRSSMiB float64  `json:"peakRssMiB"`
	// StageMsC1 is each stage's mean handling time per event at
	// concurrency 1 (handler, store round trips, publish).
	StageMsC1 map[string]float64 `json:"stageMsC1,omitempty"`
	// TimelineC1 is where a turn's time goes at concurrency 1, from the
	// events' stored times (timeline.go).
	TimelineC1 Timeline `json:"timelineC1"`
	// Writes and GatewayWrites are the durable writes (messages stored,
	// counted by the server) per turn at concurrency 1, bus and gateway: all
	// of them, over the latency run.
	Writes        Writes `json:"writes"`
	GatewayWrites Writes `json:"gatewayWrites"`
	// WritesSplit and GatewayWritesSplit are the same writes split at the
	// turn's answer (the completion event stored; the HTTP response
	// returned), over a sample of sequential turns: the goal judges the
	// writes before it.
	WritesSplit        Split           `json:"writesSplit"`
	GatewayWritesSplit Split           `json:"gatewayWritesSplit"`
	Soak               SoakResult      `json:"soak"`
	Ratios             Ratios          `json:"ratios"`
	Goals              map[string]bool `json:"goals"`
}

// Ratios compare Aptix with the floors measured in the same run.
type Ratios struct {
	AddedLatencyP50Ms float64         `json:"addedLatencyP50Ms"`
	AddedLatencyP99Ms float64         `json:"addedLatencyP99Ms"`
	LatencyVsChainP50 float64         `json:"latencyVsChainP50"`
	ThroughputVsChain map[int]float64 `json:"throughputVsChain"`
	// GatewayAddedP50Ms is gateway − bus at concurrency 1; GatewayVsBus the
	// gateway's throughput over the bus path's.
	GatewayAddedP50Ms float64         `json:"gatewayAddedP50Ms"`
	GatewayVsBus      map[int]float64 `json:"gatewayVsBus"`
	// ChatAddedP50Ms and ChatAddedCPUMs are what a Chat Completions backend
	// adds to a turn at concurrency 1 (chat row − aptix row): the
	// translation both ways.
	ChatAddedP50Ms float64 `json:"chatAddedP50Ms"`
	ChatAddedCPUMs float64 `json:"chatAddedCpuMs"`
	// CPUChainOverAptix is the chain's CPU per operation over Aptix's: the
	// throughput ratio the two would reach on cores of their own.
	CPUChainOverAptix map[int]float64 `json:"cpuChainOverAptix"`
}

// SoakResult is the many-turns-in-flight run against a slow model.
type SoakResult struct {
	Turns            int     `json:"turns"`
	Completed        int     `json:"completed"`
	Duplicates       int     `json:"duplicates"`
	UpstreamCalls    int     `json:"upstreamCalls"`
	ModelLatencyMs   float64 `json:"modelLatencyMs"`
	Latency          Latency `json:"latency"`
	AddedLatencyP99  float64 `json:"addedLatencyP99Ms"`
	Seconds          float64 `json:"seconds"`
	MaxUpstreamInFly int     `json:"maxUpstreamInFlight"`
	// PeakRSSMiB is the peak RSS of the soak's process: embedded
	// nats-server, the stages and the client, the sandbox not included.
	PeakRSSMiB          float64 `json:"peakRssMiB"`
	SandboxOutOfProcess bool    `json:"sandboxOutOfProcess"`
}

// Concurrencies of the throughput runs.
var Concurrencies = []int{64, 256}

// Run runs every phase on one embedded nats-server (file storage, the fsync
// policy of o.Sync: by default the one `aptix up` ships) and returns
// the figures.
func Run(ctx context.Context, o Options) (Report, error) {
	o = o.withDefaults()
	r := Report{When: time.Now().UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Storage: StorageLabel(o.Sync), Chain: map[int]Load{}, Aptix: map[int]Load{}, Gateway: map[int]Load{}, HTTPFloor: map[int]Load{}}
	dir, err := os.MkdirTemp("", "aptix-bench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	ns, err := StartServer(dir, o.Sync)
	if err != nil {
		return r, err
	}
	defer ns.Shutdown()
	url := ns.ClientURL()
	chunks, err := fixtureChunks()
	if err != nil {
		return r, err
	}
	maxC := Concurrencies[len(Concurrencies)-1]

	// Aptix first at concurrency 1 (after a warm-up), which also yields the
	// body and the event sizes the floors replay.
	sb, err := startSandbox(0)
	if err != nil {
		return r, err
	}
	defer sb.close()
	p, err := startPipeline(ctx, url, sb, chunks, maxC)
	if err != nil {
		return r, err
	}
	warm, err := p.turn(ctx, benchRequest("warm", 0))
	if err != nil {
		return r, fmt.Errorf("warm-up turn: %w", err)
	}
	if got := len(warm.Response.Sources); got != len(chunks) {
		return r, fmt.Errorf("warm-up turn carried %d sources, want %d", got, len(chunks))
	}
	if r.EventBytes, err = eventSizes(ctx, p.js, warm.ConversationId, warm.TurnId); err != nil {
		return r, err
	}
	body, err := envelopeBody(ctx, p.js, warm.ConversationId, warm.TurnId)
	if err != nil {
		return r, err
	}
	for i := range 200 {
		if _, err := p.turn(ctx, benchRequest("warm", i+1)); err != nil {
			return r, err
		}
	}

	o.Progress("direct: openai-go → sandbox, concurrency 1, %d calls", o.LatencyTurns)
	r.Direct = direct(ctx, sb.URL, body, o.LatencyTurns, 1)
	if err := r.Direct.err("direct"); err != nil {
		return r, err
	}

	o.Progress("aptix: concurrency 1, %d turns", o.LatencyTurns)
	busy := stageBusy(p.client)
	seqs, err := storedSeqs(ctx, p.js)
	if err != nil {
		return r, err
	}
	sent := make([]sentTurn, o.LatencyTurns)
	r.Aptix[1] = closedLoop(ctx, o.LatencyTurns, 1, func(ctx context.Context, i int) error {
		req := benchRequest("c1", i)
		t0 := time.Now()
		_, err := p.turn(ctx, req)
		sent[i] = sentTurn{conv: req.ConversationId, turn: req.TurnId, sent: t0, answer: time.Now()}
		return err
	})
	r.StageMsC1 = stageMs(busy, stageBusy(p.client))
	// The last turns (at most 500) of the run, read back after it.
	if r.TimelineC1, err = timeline(ctx, p.js, sent[max(0, len(sent)-500):]); err != nil {
		return r, err
	}
	after, err := storedSeqs(ctx, p.js)
	if err != nil {
		return r, err
	}
	r.Writes = writesPerOp(seqs, after, r.Aptix[1].Ops)
	o.Progress("aptix: durable writes before and after the answer, %d sequential turns", o.SplitTurns)
	if r.WritesSplit, err = sampleSplit(ctx, p.js, o.SplitTurns, func(ctx context.Context, i int) (func(context.Context) (time.Time, error), error) {
		req := benchRequest("split", i)
		if _, err := p.turn(ctx, req); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (time.Time, error) {
			return completedAt(ctx, p.js, req.ConversationId, req.TurnId)
		}, nil
	}); err != nil {
		return r, err
	}
	for _, c := range Concurrencies {
		o.Progress("aptix: concurrency %d, %d turns", c, o.ThroughputTurns)
		r.Aptix[c] = closedLoop(ctx, o.ThroughputTurns, c, func(ctx context.Context, i int) error {
			_, err := p.turn(ctx, benchRequest(fmt.Sprintf("c%d", c), i))
			return err
		})
	}
	if o.Quick && !o.QuickGateway {
		return quickEnd(ctx, r, p, sb, chunks, url, o)
	}
	// The bus path's completion watch would otherwise take a copy of every
	// gateway turn's completion too, a cost the gateway path does not have.
	p.comp.Stop()
	gw, err := startGateway(ctx, p, p.set, maxC)
	if err != nil {
		return r, fmt.Errorf("gateway: %w", err)
	}
	for i := range 200 {
		if err := gw.turn(ctx); err != nil {
			return r, fmt.Errorf("gateway warm-up turn %d: %w", i, err)
		}
	}
	canned, err := post(ctx, gw.client)
	if err != nil {
		return r, fmt.Errorf("gateway turn for the HTTP floor: %w", err)
	}
	floor, err := startHTTPFloor(canned, maxC)
	if err != nil {
		return r, fmt.Errorf("HTTP floor: %w", err)
	}
	for _, c := range []int{1, 64} {
		n := o.ThroughputTurns
		if c == 1 {
			n = o.LatencyTurns
		}
		o.Progress("HTTP floor: openai-go → POST /v1/responses → a canned response, concurrency %d, %d requests", c, n)
		r.HTTPFloor[c] = closedLoop(ctx, n, c, func(ctx context.Context, _ int) error { return floor.turn(ctx) })
		if err := r.HTTPFloor[c].err(fmt.Sprintf("HTTP floor at concurrency %d", c)); err != nil {
			return r, err
		}
	}
	floor.close()
	for _, c := range append([]int{1}, Concurrencies...) {
		n := o.ThroughputTurns
		if c == 1 {
			n = o.LatencyTurns
		}
		o.Progress("gateway: openai-go → POST /v1/responses → pipeline, concurrency %d, %d turns", c, n)
		seqs, err := storedSeqs(ctx, p.js)
		if err != nil {
			return r, err
		}
		r.Gateway[c] = closedLoop(ctx, n, c, func(ctx context.Context, _ int) error { return gw.turn(ctx) })
		if c == 1 {
			after, err := storedSeqs(ctx, p.js)
			if err != nil {
				return r, err
			}
			r.GatewayWrites = writesPerOp(seqs, after, r.Gateway[1].Ops)
			if err := r.Gateway[1].err("gateway at concurrency 1"); err != nil {
				return r, err
			}
			o.Progress("gateway: durable writes before and after the HTTP response, %d sequential turns", o.SplitTurns)
			if r.GatewayWritesSplit, err = sampleSplit(ctx, p.js, o.SplitTurns, func(ctx context.Context, _ int) (func(context.Context) (time.Time, error), error) {
				if err := gw.turn(ctx); err != nil {
					return nil, err
				}
				at := time.Now()
				return func(context.Context) (time.Time, error) { return at, nil }, nil
			}); err != nil {
				return r, err
			}
		}
	}
	if o.Quick {
		gw.close()
		for c, l := range r.Gateway {
			if err := l.err(fmt.Sprintf("gateway at concurrency %d", c)); err != nil {
				return r, err
			}
		}
		return quickEnd(ctx, r, p, sb, chunks, url, o)
	}
	if r.ToolLoop, err = runToolLoop(ctx, gw.base, o.ToolLoopRounds, o.ToolLoops, o.ToolLoopConcurrency, o.ToolLoopReps, o.Progress); err != nil {
		return r, fmt.Errorf("tool loop: %w", err)
	}
	gw.close()
	r.PeakRSSMiB = peakRSSMiB()
	for c, l := range r.Gateway {
		if err := l.err(fmt.Sprintf("gateway at concurrency %d", c)); err != nil {
			return r, err
		}
	}
	for c, l := range r.Aptix {
		if err := l.err(fmt.Sprintf("aptix at concurrency %d", c)); err != nil {
			return r, err
		}
	}
	if err := p.close(); err != nil {
		return r, fmt.Errorf("stop stages: %w", err)
	}
	if err := runChatRow(ctx, &r, url, sb, chunks, o); err != nil {
		return r, err
	}

	if err := runChain(ctx, &r, url, o); err != nil {
		return r, err
	}

	o.Progress("soak: %d turns in flight, sandbox latency %s (a child process when run by aptix: bench --soak-only)", o.SoakTurns, o.SoakLatency)
	if SelfExec {
		// The child has its own nats-server: this one, holding every
		// earlier phase's streams, would otherwise flush and compact them
		// on the same disk and cores while the soak runs.
		ns.Shutdown()
		ns.WaitForShutdown()
		os.RemoveAll(dir)
		runtime.GC()
		r.Soak, err = soakChild(ctx, o)
	} else {
		r.Soak, err = soak(ctx, url, chunks, o.SoakTurns, o.SoakLatency)
	}
	if err != nil {
		return r, err
	}
	setRatios(&r)
	return r, nil
}

// quickEnd finishes a Quick run: the chat row, the chain, and the ratios of
// what was measured.
func quickEnd(ctx context.Context, r Report, p *pipelineRun, sb upstream, chunks []contracts.RagChunk, url string, o Options) (Report, error) {
	for c, l := range r.Aptix {
		if err := l.err(fmt.Sprintf("aptix at concurrency %d", c)); err != nil {
			return r, err
		}
	}
	if err := p.close(); err != nil {
		return r, fmt.Errorf("stop stages: %w", err)
	}
	if err := runChatRow(ctx, &r, url, sb, chunks, o); err != nil {
		return r, err
	}
	if err := runChain(ctx, &r, url, o); err != nil {
		return r, err
	}
	r.PeakRSSMiB = peakRSSMiB()
	setRatios(&r)
	return r, nil
}

// runChatRow measures the bench turn through a Chat Completions profile in
// front of the same sandbox (its chat endpoint), at concurrency 1, after a
// warm-up. It runs once the Responses pipeline has stopped: both use the
// stages' durable consumers.
func runChatRow(ctx context.Context, r *Report, url string, sb upstream, chunks []contracts.RagChunk, o Options) error {
	p, err := startPipelineAPI(ctx, url, sb, chunks, 1, profiles.APIChatCompletions)
	if err != nil {
		return fmt.Errorf("chat pipeline: %w", err)
	}
	for i := range 200 {
		if _, err := p.turn(ctx, benchRequest("chat-warm", i)); err != nil {
			_ = p.close()
			return fmt.Errorf("chat warm-up turn: %w", err)
		}
	}
	o.Progress("aptix, chat completions backend: concurrency 1, %d turns", o.LatencyTurns)
	r.AptixChat = map[int]Load{1: closedLoop(ctx, o.LatencyTurns, 1, func(ctx context.Context, i int) error {
		_, err := p.turn(ctx, benchRequest("chat-c1", i))
		return err
	})}
	if err := p.close(); err != nil {
		return fmt.Errorf("stop chat stages: %w", err)
	}
	return r.AptixChat[1].err("aptix with a chat completions backend")
}

// runChain measures the raw JetStream chain at every concurrency.
func runChain(ctx context.Context, r *Report, url string, o Options) error {
	maxC := Concurrencies[len(Concurrencies)-1]
	ch, err := newChain(ctx, url, r.EventBytes, maxC)
	if err != nil {
		return err
	}
	first := make([]byte, r.EventBytes[0])
	for i := range first {
		first[i] = 'x'
	}
	for _, c := range append([]int{1}, Concurrencies...) {
		n := o.ThroughputTurns
		if c == 1 {
			n = o.LatencyTurns
		}
		o.Progress("raw JetStream five-hop chain: concurrency %d, %d chains", c, n)
		r.Chain[c] = closedLoop(ctx, n, c, func(ctx context.Context, i int) error {
			return ch.run(ctx, fmt.Sprintf("c%d-%d", c, i), first)
		})
		if err := r.Chain[c].err("chain"); err != nil {
			return err
		}
	}
	ch.close()
	return nil
}

// setRatios compares Aptix with the floors and marks the goals.
func setRatios(r *Report) {
	r.Ratios = Ratios{
		AddedLatencyP50Ms: round3(r.Aptix[1].Latency.P50 - r.Direct.Latency.P50),
		AddedLatencyP99Ms: round3(r.Aptix[1].Latency.P99 - r.Direct.Latency.P99),
		LatencyVsChainP50: ratio(r.Aptix[1].Latency.P50, r.Chain[1].Latency.P50),
		ThroughputVsChain: map[int]float64{},
		GatewayAddedP50Ms: round3(r.Gateway[1].Latency.P50 - r.Aptix[1].Latency.P50),
		GatewayVsBus:      map[int]float64{},
		CPUChainOverAptix: map[int]float64{},
	}
	if l, ok := r.AptixChat[1]; ok {
		r.Ratios.ChatAddedP50Ms = round3(l.Latency.P50 - r.Aptix[1].Latency.P50)
		r.Ratios.ChatAddedCPUMs = round3(l.CPUMsPerOp - r.Aptix[1].CPUMsPerOp)
	}
	for _, c := range Concurrencies {
		r.Ratios.ThroughputVsChain[c] = ratio(r.Aptix[c].PerSecond, r.Chain[c].PerSecond)
		r.Ratios.GatewayVsBus[c] = ratio(r.Gateway[c].PerSecond, r.Aptix[c].PerSecond)
		r.Ratios.CPUChainOverAptix[c] = ratio(r.Chain[c].CPUMsPerOp, r.Aptix[c].CPUMsPerOp)
	}
	r.Goals = map[string]bool{
		"addedLatencyP50<=0.5ms":      r.Ratios.AddedLatencyP50Ms <= 0.5,
		"cpuPerTurn<=1.5xChain64":     r.Aptix[64].CPUMsPerOp <= 1.5*r.Chain[64].CPUMsPerOp,
		"cpuPerTurn<=1.5xChain256":    r.Aptix[256].CPUMsPerOp <= 1.5*r.Chain[256].CPUMsPerOp,
		"throughput>=90%ofCeiling64":  r.Ratios.ThroughputVsChain[64] >= 0.9*ceiling(*r, 64),
		"throughput>=90%ofCeiling256": r.Ratios.ThroughputVsChain[256] >= 0.9*ceiling(*r, 256),
		"durableWritesPerTurn<=6":     criticalWrites(r.Writes, r.WritesSplit) <= 6,
	}
	if len(r.Gateway) == 0 { // a Quick run
		return
	}
	for k, v := range map[string]bool{
		"gatewayOverDirectP50<=1.0ms":    r.Gateway[1].Latency.P50-r.Direct.Latency.P50 <= 1.0,
		"gatewayOwnCPU<=0.15ms":          gatewayOwnCPU(*r, 1) <= 0.15,
		"gatewayDurableWritesPerTurn<=6": criticalWrites(r.GatewayWrites, r.GatewayWritesSplit) <= 6,
	} {
		r.Goals[k] = v
	}
	if r.ToolLoop.Rounds > 0 { // not measured by a Quick run
		r.Goals["wsToolLoopTime<=0.75xHTTP@1"] = r.ToolLoop.TimeRatio <= 0.75
		r.Goals["wsToolLoopThroughput>=1xHTTP@64"] = r.ToolLoop.ThroughputRatio >= 1.0
	}
	if r.Soak.Turns > 0 {
		r.Goals["soakNoTurnLost"] = r.Soak.Completed == r.Soak.Turns && r.Soak.Duplicates == 0 && r.Soak.UpstreamCalls == r.Soak.Turns
		r.Goals["soak10000InFlight"] = r.Soak.Turns >= 10000
		r.Goals["soakPeakRSS<=1GiB"] = r.Soak.PeakRSSMiB > 0 && r.Soak.PeakRSSMiB <= 1024
	}
}

// criticalWrites is what the writes goal judges: the median turn's writes stored before its
// answer when the split was measured, else all of them per turn (a report
// from before the split); a run that counted nothing is never a pass.
func criticalWrites(total Writes, split Split) float64 {
	w := total.PerOp
	if split.Turns > 0 {
		w = float64(split.MedianBefore)
	}
	if w <= 0 {
		return math.Inf(1)
	}
	return w
}

// completedAt is when the server stored a turn's completion event: the
// moment a client on the bus could see its answer.
func completedAt(ctx context.Context, js jetstream.JetStream, conv, turn string) (time.Time, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return time.Time{}, err
	}
	m, err := s.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageCompleted, conv, turn))
	if err != nil {
		return time.Time{}, fmt.Errorf("read completed event of %s: %w", turn, err)
	}
	return m.Time, nil
}

// ceiling is the share of the chain's rate a pipeline could reach at
// concurrency c on these cores, where each turn also pays the model call's
// own CPU (openai-go and the sandbox, the direct row): chain / (chain +
// direct), in CPU per operation.
func ceiling(r Report, c int) float64 {
	ch, d := r.Chain[c].CPUMsPerOp, r.Direct.CPUMsPerOp
	if ch+d == 0 {
		return 0
	}
	return ch / (ch + d)
}

// gatewayOwnCPU is the gateway's CPU per turn beyond the bus path and the
// HTTP floor (openai-go and net/http answering a canned reply) at c.
func gatewayOwnCPU(r Report, c int) float64 {
	return r.Gateway[c].CPUMsPerOp - r.Aptix[c].CPUMsPerOp - r.HTTPFloor[c].CPUMsPerOp
}

// soak sends every turn at once to a pipeline whose model takes latency to
// answer: all must complete, once, with one upstream call each. The sandbox
// runs in its own process (`aptix sandbox`, as beside `aptix up`), so the
// process's peak RSS is the pipeline's: the embedded nats-server, the four
// stages and the client holding every turn.
func soak(ctx context.Context, url string, chunks []contracts.RagChunk, turns int, latency time.Duration) (SoakResult, error) {
	res := SoakResult{Turns: turns, ModelLatencyMs: ms(latency)}
	var sb upstream
	var err error
	if SelfExec {
		sb, err = startSandboxProcess(ctx, latency)
		res.SandboxOutOfProcess = true
	} else {
		sb, err = startSandbox(latency)
	}
	if err != nil {
		return res, err
	}
	defer sb.close()
	p, err := startPipeline(ctx, url, sb, chunks, turns+turns/4)
	if err != nil {
		return res, err
	}
	before, _, err := sb.requests()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	l := closedLoop(ctx, turns, turns, func(ctx context.Context, i int) error {
		_, err := p.turn(ctx, benchRequest("soak", i))
		return err
	})
	// Let any late duplicate arrive before counting.
	time.Sleep(500 * time.Millisecond)
	completed, dups, _ := p.comp.Counts()
	res.Completed, res.Duplicates = completed, dups
	after, maxFly, err := sb.requests()
	if err != nil {
		return res, err
	}
	res.UpstreamCalls = after - before
	res.MaxUpstreamInFly = maxFly
	res.Latency = l.Latency
	res.AddedLatencyP99 = round3(l.Latency.P99 - ms(latency))
	res.Seconds = l.Seconds
	res.PeakRSSMiB = peakRSSMiB()
	if err := p.close(); err != nil {
		return res, err
	}
	if err := l.err("soak"); err != nil {
		return res, err
	}
	return res, nil
}

// RunSoak runs only the soak, on its own embedded nats-server: `aptix bench
// --soak-only`, which `aptix bench` runs as a child process so the soak's
// peak RSS is its own, not the earlier phases'.
func RunSoak(ctx context.Context, o Options) (SoakResult, error) {
	o = o.withDefaults()
	dir, err := os.MkdirTemp("", "aptix-soak-")
	if err != nil {
		return SoakResult{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := StartServer(dir, o.Sync)
	if err != nil {
		return SoakResult{}, err
	}
	defer ns.Shutdown()
	chunks, err := fixtureChunks()
	if err != nil {
		return SoakResult{}, err
	}
	o.Progress("soak: %d turns in flight, sandbox latency %s, sandbox in its own process", o.SoakTurns, o.SoakLatency)
	defer soakProfiler(o.Progress)()
	return soak(ctx, ns.ClientURL(), chunks, o.SoakTurns, o.SoakLatency)
}

// StartServer runs the bench's embedded nats-server on storeDir with the
// given fsync policy (0: fsync every write, as `aptix up` ships).
func StartServer(storeDir string, sync fsync.Policy) (*server.Server, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true}
	shippedOr(sync).Apply(opts)
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("nats-server not ready")
	}
	return ns, nil
}

// StorageLabel names the fsync policy a run measured, for the table's
// heading: a run that is not the shipped policy says so.
func StorageLabel(sync fsync.Policy) string {
	sync = shippedOr(sync)
	if sync == fsync.Shipped {
		return "file storage, " + sync.Describe() + " (as `aptix up` ships)"
	}
	return "file storage, " + sync.Describe() + " (NOT the policy `aptix up` ships)"
}

// shippedOr is p, or the shipped policy for the zero value.
func shippedOr(p fsync.Policy) fsync.Policy {
	if p == (fsync.Policy{}) {
		return fsync.Shipped
	}
	return p
}

// SelfExec is set by the aptix binary: this process can run `aptix sandbox`
// and `aptix bench --soak-only` as child processes. Unset (a test binary),
// the soak and its sandbox run in this process.
var SelfExec bool

// soakChild runs RunSoak in a child process (this binary's bench --soak-only).
func soakChild(ctx context.Context, o Options) (SoakResult, error) {
	var res SoakResult
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	out, err := os.CreateTemp("", "aptix-soak-*.json")
	if err != nil {
		return res, err
	}
	out.Close()
	defer os.Remove(out.Name())
	cmd := exec.CommandContext(ctx, exe, "bench", "--soak-only", "--soak-turns", strconv.Itoa(o.SoakTurns),
		"--soak-latency", o.SoakLatency.String(), "--sync", shippedOr(o.Sync).String(), "--out", out.Name())
	cmd.Stderr = os.Stderr
	if b, err := cmd.Output(); err != nil {
		return res, fmt.Errorf("soak: %w\n%s", err, b)
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(data, &res)
}

func round3(f float64) float64 { return ms(time.Duration(f * 1e6)) }

// runtimeGOROOT asks the go command, since a trimmed binary may not know.
func runtimeGOROOT() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "/usr/local/go"
}
