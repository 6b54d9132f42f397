package bench

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every phase at a tiny size: the harness must produce a
// complete report, and the soak must count every turn once.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, Options{LatencyTurns: 20, ThroughputTurns: 64, SoakTurns: 50, SoakLatency: 100 * time.Millisecond,
		ToolLoops: 2, ToolLoopReps: 1, ToolLoopConcurrency: 4, ToolLoopRounds: 3, SplitTurns: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Direct.Latency.N != 20 || r.Aptix[1].Latency.N != 20 || r.Chain[1].Latency.N != 20 {
		t.Errorf("latency samples: direct %d aptix %d chain %d", r.Direct.Latency.N, r.Aptix[1].Latency.N, r.Chain[1].Latency.N)
	}
	for _, c := range Concurrencies {
		if r.Aptix[c].Latency.N != 64 || r.Chain[c].Latency.N != 64 || r.Aptix[c].PerSecond <= 0 {
			t.Errorf("concurrency %d: aptix %+v chain %+v", c, r.Aptix[c], r.Chain[c])
		}
	}
	// Every timed turn's events are read back; each gap is a positive time.
	if tl := r.TimelineC1; tl.Turns != 20 || tl.ToRetrieved <= 0 || tl.ToEnveloped <= 0 || tl.ToResponded <= 0 || tl.ToCompleted <= 0 || tl.ToClient <= 0 {
		t.Errorf("timeline at concurrency 1: %+v", tl)
	}
	if r.AptixChat[1].Latency.N != 20 || r.AptixChat[1].PerSecond <= 0 {
		t.Errorf("chat backend samples: %+v", r.AptixChat)
	}
	if r.Gateway[1].Latency.N != 20 || r.Gateway[64].Latency.N != 64 || r.Gateway[256].Latency.N != 64 {
		t.Errorf("gateway samples: %+v", r.Gateway)
	}
	if tl := r.ToolLoop; tl.WS.Median <= 0 || tl.HTTP.Median <= 0 || tl.WSThroughput.Median <= 0 || tl.HTTPThroughput.Median <= 0 {
		t.Errorf("tool loop: %+v", tl)
	}
	if s := r.Soak; s.Completed != 50 || s.Duplicates != 0 || s.UpstreamCalls != 50 || s.Latency.P50 < 100 {
		t.Errorf("soak: %+v", s)
	}
	// Every turn stores at least its five events (the request in the queue,
	// four in APTIX). The gateway row's responses start their
	// conversations, so their records travel in the turns' events and no
	// response record is written (docs/http-api.md#where-a-response-is-kept).
	if r.Writes.PerOp < 5 || r.Writes.ByStream["APTIX"] < 4 || r.GatewayWrites.PerOp < 5 || r.GatewayWrites.ByStream["KV_aptix_responses"] != 0 {
		t.Errorf("durable writes per turn: bus %s, gateway %s", r.Writes, r.GatewayWrites)
	}
	// The split sample's turns store what the latency run's do, cut in two:
	// the five events are all stored by the answer. Two writers are not
	// the turn's own and land in either count by timing: the usage fold,
	// which folds in the background (so a fold of the latency run's last
	// turns can land in the sample), and the queue's keeper, written once a
	// second; they are compared with room for that.
	for name, sp := range map[string]struct {
		s     Split
		total Writes
	}{"bus": {r.WritesSplit, r.Writes}, "gateway": {r.GatewayWritesSplit, r.GatewayWrites}} {
		if sp.s.Turns != 10 || sp.s.Before.PerOp < 5 || sp.s.Before.ByStream["APTIX"] < 4 {
			t.Errorf("%s path split %s, total %s", name, sp.s, sp.total)
		}
		streams := map[string]bool{}
		for _, m := range []map[string]float64{sp.s.Before.ByStream, sp.s.After.ByStream, sp.total.ByStream} {
			for k := range m {
				streams[k] = true
			}
		}
		for k := range streams {
			// The latency run's last turns may still be writing after
			// the answer when its count is taken: one of its 20 turns.
			room := 0.1
			switch k {
			case "KV_aptix_usage":
				room = 1.5
			case "APTIX_QUEUE":
				room = 0.4
			case "APTIX_USAGE", "KV_aptix_conversations":
				// Written after the answer: under load a few of the
				// latency run's last turns may still be writing them.
				room = 0.25
			}
			if d := sp.s.Before.ByStream[k] + sp.s.After.ByStream[k] - sp.total.ByStream[k]; math.Abs(d) > room {
				t.Errorf("%s path, %s: %.2f before + %.2f after the answer, %.2f in the latency run", name, k, sp.s.Before.ByStream[k], sp.s.After.ByStream[k], sp.total.ByStream[k])
			}
		}
	}
	for i, n := range r.EventBytes {
		if n == 0 {
			t.Errorf("event %d size 0", i)
		}
	}
	var out bytes.Buffer
	if err := Table(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"direct openai-go", "raw JetStream 5-hop chain", "aptix turn", "aptix turn, chat completions backend", "chat completions backend added", "gateway: openai-go → HTTP → aptix", "throughput gateway / bus", "tool loop, 3 client-side rounds", "soak: 50 turns", "durable writes per turn at concurrency 1", "before the answer", "gateway path:", "goals:", "durableWritesPerTurn<=6", "gatewayOverDirectP50<=1.0ms", "soakPeakRSS<=1GiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
