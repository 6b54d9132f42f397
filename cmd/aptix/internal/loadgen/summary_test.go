package loadgen

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummarizeJudgesGoalsOnTheRoundsMedian(t *testing.T) {
	var samples []Sample
	// Three rounds: direct p50 0.3 ms, gateway A 0.3 + {0.8, 0.9, 2.0}
	// (median added 0.9: met though one round missed), B twice A's p50.
	for i, added := range []float64{0.8, 0.9, 2.0} {
		r := i + 1
		samples = append(samples,
			Sample{Round: r, Side: "direct", Result: Result{Concurrency: 1, P50: 0.3, P99: 1, PerSecond: 1000, ServerCPUMs: 0.2}},
			Sample{Round: r, Side: "A", Result: Result{Concurrency: 1, P50: 0.3 + added, P99: 5, PerSecond: 400, ServerCPUMs: 1}},
			Sample{Round: r, Side: "B", Result: Result{Concurrency: 1, P50: 2 * (0.3 + added), P99: 3.5, PerSecond: 200, ServerCPUMs: 1.5}},
			Sample{Round: r, Side: "direct", Result: Result{Concurrency: 64, P50: 20, P99: 40, PerSecond: 3000, ServerCPUMs: 0.1}},
			Sample{Round: r, Side: "A", Result: Result{Concurrency: 64, P50: 60, P99: 90, PerSecond: 900 + float64(r)*100, ServerCPUMs: 0.6}},
			Sample{Round: r, Side: "B", Result: Result{Concurrency: 64, P50: 50, P99: 80, PerSecond: 1200, ServerCPUMs: 0.24}},
		)
	}
	loops := []LoopSample{{Round: 1, Side: "A", WSSeconds: 0.7, HTTPSeconds: 1}, {Round: 2, Side: "A", WSSeconds: 0.8, HTTPSeconds: 1},
		{Round: 3, Side: "A", WSSeconds: 0.9, HTTPSeconds: 1}, {Round: 1, Side: "B", WSSeconds: 0.5, HTTPSeconds: 1}}
	sum := Summarize(samples, loops, []string{"A", "B"})
	row := func(c int, side, metric string) Spread {
		for _, r := range sum.Rows {
			if r.Concurrency == c && r.Side == side && r.Metric == metric {
				return r.Spread
			}
		}
		t.Fatalf("no row %d %s %q", c, side, metric)
		return Spread{}
	}
	if s := row(1, "A", addedP50); s.Median != 0.9 || s.Min != 0.8 || s.Max != 2 || s.N != 3 {
		t.Errorf("A's added p50 = %+v, want 0.9 (0.8–2.0) over 3", s)
	}
	if s := row(1, "B", "p50 ms ÷ A"); s.Median != 2 || s.Min != 2 || s.Max != 2 {
		t.Errorf("B's p50 over A per round = %+v, want 2", s)
	}
	if s := row(64, "A", rateDirect); s.Median != 0.367 {
		t.Errorf("A's rate over direct at 64 = %+v, want 1100/3000", s)
	}
	// The direct call has no sandbox pid of its own: no row, not a zero.
	for _, r := range sum.Rows {
		if r.Side == "direct" && r.Metric == "sandbox CPU ms/request" {
			t.Errorf("a direct row for a figure never read: %+v", r)
		}
	}
	met := map[string]bool{}
	for _, g := range sum.Goals {
		met[g.Side+" "+strings.Join(strings.Fields(g.Name)[:2], " ")] = g.Met
	}
	want := map[string]bool{
		"A added p50": true, "A added p99": false, "A server CPU": false, "A throughput at": true, "A WebSocket tool": false,
		"B added p50": false, "B added p99": true, "B server CPU": true, "B throughput at": true, "B WebSocket tool": true,
	}
	for k, v := range want {
		if got, ok := met[k]; !ok || got != v {
			t.Errorf("goal %q met = %v (judged: %v), want %v", k, got, ok, v)
		}
	}
	var buf bytes.Buffer
	if err := Table(&buf, &Report{Rounds: 3, Summary: sum, Bins: map[string]string{"A": "a", "B": "b"}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "0.90 (0.80–2.00)") || !strings.Contains(out, "met, moonshot too") {
		t.Errorf("table lacks A's added p50 spread or B's moonshot:\n%s", out)
	}
}

func TestGatewayOrderAlternates(t *testing.T) {
	if got := gatewayOrder(2, 1); got[0] != 0 || got[1] != 1 {
		t.Errorf("round 1: %v, want A, B", got)
	}
	if got := gatewayOrder(2, 2); got[0] != 1 || got[1] != 0 {
		t.Errorf("round 2: %v, want B, A", got)
	}
	if got := gatewayOrder(1, 2); len(got) != 1 || got[0] != 0 {
		t.Errorf("one gateway: %v", got)
	}
}
