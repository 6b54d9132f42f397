package loadgen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/bench"
)

// BenchOptions is a run of the gateway from outside: `aptix sandbox` and
// `aptix up` as processes of their own, this process the client.
type BenchOptions struct {
	// Bins are the aptix binaries whose gateways are measured: one, or two
	// for an A/B, interleaved in every round. The sandbox is Bins[0]'s.
	Bins          []string
	Rounds        int
	Concurrencies []int
	// Requests maps a concurrency to its timed requests per run.
	Requests     map[int]int
	Warmup       int
	Stream       bool
	Model, Input string
	// Env is added to each up's environment (KEY=VALUE), e.g. APTIX_SYNC=always.
	Env []string
	// ToolLoops, when not 0, is how many 20-round client-side tool loops
	// each gateway runs per round over WebSocket mode and over HTTP+SSE
	// (interleaved, concurrency 1), after the closed-loop runs.
	ToolLoops int
	// Dir holds the rounds' data dirs and server logs.
	Dir      string
	Progress func(format string, args ...any)
}

// Sample is one run of one side in one round.
type Sample struct {
	Round   int    `json:"round"`
	Side    string `json:"side"` // "direct", or a gateway's label: "A", "B"
	LoadAvg string `json:"loadavg"`
	Result
}

// LoopSample is one gateway's tool loops in one round: the median seconds
// per loop of each transport.
type LoopSample struct {
	Round       int     `json:"round"`
	Side        string  `json:"side"`
	Rounds      int     `json:"rounds"`
	Loops       int     `json:"loops"`
	WSSeconds   float64 `json:"wsSeconds"`
	HTTPSeconds float64 `json:"httpSeconds"`
}

// toolRounds is the rounds of a tool loop: its goal is stated per
// 20-round loop.
const toolRounds = 20

// Report is a whole run: every sample and the summary read from them.
type Report struct {
	Date          string            `json:"date"`
	LoadAvgStart  string            `json:"loadavgStart"`
	LoadAvgEnd    string            `json:"loadavgEnd"`
	Bins          map[string]string `json:"bins"` // side label → binary
	Rounds        int               `json:"rounds"`
	Concurrencies []int             `json:"concurrencies"`
	Requests      map[int]int       `json:"requests"`
	Warmup        int               `json:"warmup"`
	Stream        bool              `json:"stream"`
	Samples       []Sample          `json:"samples"`
	ToolLoops     []LoopSample      `json:"toolLoops,omitempty"`
	Summary       Summary           `json:"summary"`
}

// Sides are the gateway labels of bins, in order.
func sides(bins []string) []string { return []string{"A", "B", "C", "D"}[:len(bins)] }

// Bench runs o.Rounds rounds; each starts a fresh sandbox and a fresh up
// per binary (new data dirs), then for each concurrency measures the
// sandbox directly and each gateway in turn (direct, A, B; direct, B, A in
// even rounds), then times
// each gateway's tool loops (o.ToolLoops), and stops them.
func Bench(ctx context.Context, o BenchOptions) (*Report, error) {
	if len(o.Bins) == 0 || len(o.Bins) > 4 {
		return nil, fmt.Errorf("bench: 1 to 4 binaries, not %d", len(o.Bins))
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), LoadAvgStart: loadAvg(), Bins: map[string]string{},
		Rounds: o.Rounds, Concurrencies: o.Concurrencies, Requests: o.Requests, Warmup: o.Warmup, Stream: o.Stream}
	labels := sides(o.Bins)
	for i, b := range o.Bins {
		rep.Bins[labels[i]] = b
	}
	for round := 1; round <= o.Rounds; round++ {
		samples, loops, err := benchRound(ctx, o, round, labels, progress)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		rep.Samples = append(rep.Samples, samples...)
		rep.ToolLoops = append(rep.ToolLoops, loops...)
	}
	rep.LoadAvgEnd = loadAvg()
	rep.Summary = Summarize(rep.Samples, rep.ToolLoops, labels)
	return rep, nil
}

func benchRound(ctx context.Context, o BenchOptions, round int, labels []string, progress func(string, ...any)) (_ []Sample, _ []LoopSample, err error) {
	dir := filepath.Join(o.Dir, fmt.Sprintf("round%d", round))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	sb, err := startSandbox(ctx, o.Bins[0], dir)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if e := sb.stop(10 * time.Second); e != nil && err == nil {
			err = fmt.Errorf("sandbox: %w", e)
		}
	}()
	ups := make([]*server, len(o.Bins))
	for i, bin := range o.Bins {
		d := filepath.Join(dir, labels[i])
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
		up, err := startUp(ctx, bin, d, sb.base, o.Env)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway %s: %w", labels[i], err)
		}
		ups[i] = up
		defer func() {
			if e := up.stop(45 * time.Second); e != nil && err == nil {
				err = fmt.Errorf("gateway %s: %w", labels[i], e)
			}
		}()
	}
	var out []Sample
	for _, c := range o.Concurrencies {
		base := Options{Model: o.Model, Input: o.Input, Concurrency: c, Warmup: o.Warmup, Requests: o.Requests[c], Stream: o.Stream, APIKey: "unused"}
		runs := []struct {
			side string
			opt  Options
		}{{"direct", with(base, sb.base, sb.pid(), 0)}}
		for _, i := range gatewayOrder(len(ups), round) {
			runs = append(runs, struct {
				side string
				opt  Options
			}{labels[i], with(base, ups[i].base, ups[i].pid(), sb.pid())})
		}
		for _, r := range runs {
			la := loadAvg()
			res, err := Run(ctx, r.opt)
			if err == nil {
				err = res.Err()
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s at concurrency %d: %w", r.side, c, err)
			}
			progress("round %d, %s at %d: p50 %.3f ms, p99 %.3f ms, %.0f req/s, server CPU %.3f ms/req (load %s)",
				round, r.side, c, res.P50, res.P99, res.PerSecond, res.ServerCPUMs, la)
			out = append(out, Sample{Round: round, Side: r.side, LoadAvg: la, Result: res})
		}
	}
	var loops []LoopSample
	for _, i := range gatewayOrder(len(ups), round) {
		up := ups[i]
		if o.ToolLoops == 0 {
			break
		}
		ws, ht, err := bench.LoopTimes(ctx, strings.TrimSuffix(up.base, "/v1"), toolRounds, o.ToolLoops)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway %s: %w", labels[i], err)
		}
		progress("round %d, %s tool loop: WebSocket %.3f s, HTTP+SSE %.3f s per %d-round loop", round, labels[i], ws.Median, ht.Median, toolRounds)
		loops = append(loops, LoopSample{Round: round, Side: labels[i], Rounds: toolRounds, Loops: o.ToolLoops, WSSeconds: ws.Median, HTTPSeconds: ht.Median})
	}
	return out, loops, nil
}

// gatewayOrder is the order the gateways run in a round: A, B in odd
// rounds, B, A in even ones, so neither always runs second (an A/A run of
// one build measured the second gateway at 0.81 of the first's rate at 64
// with a fixed order).
func gatewayOrder(n, round int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if round%2 == 0 {
			order[i] = n - 1 - i
		}
	}
	return order
}

func with(o Options, base string, server, sandbox int) Options {
	o.BaseURL, o.ServerPID, o.SandboxPID = base, server, sandbox
	return o
}
