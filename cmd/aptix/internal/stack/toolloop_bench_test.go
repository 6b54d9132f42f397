package stack

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkToolRound measures what one server-side tool round adds to a
// turn beyond the tool's own time: turns through the gateway without tools
// (A) and with one round of an instant MCP tool (B, echo), interleaved
// A, B, A, B … in rounds of 20 pairs; per round the median of B−A−tool time,
// then the median of the rounds and their spread. B−A includes the second
// model call (the sandbox over loopback) and the toolrunner's hops:
// discovery, the round, and the next call's event.
//
//	go test -run '^$' -bench ToolRound -benchtime 1x ./cmd/aptix/internal/stack/
func BenchmarkToolRound(b *testing.B) {
	e, _ := toolEnv(b)
	_, client := e.gateway()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	plain := loopParams("hello")
	tooled := loopParams(`[call:echo {"text":"hi"}]`, mcpTool("calc"))
	// Warm up both paths (MCP session, tools/list cache, connections).
	for range 5 {
		if _, err := client.Responses.New(ctx, plain); err != nil {
			b.Fatal(err)
		}
		if _, err := client.Responses.New(ctx, tooled); err != nil {
			b.Fatal(err)
		}
	}
	const rounds, pairs = 5, 20
	var perRound, plainMs, toolMs []float64
	for range rounds {
		var added []float64
		for range pairs {
			s := time.Now()
			if _, err := client.Responses.New(ctx, plain); err != nil {
				b.Fatal(err)
			}
			a := time.Since(s)
			s = time.Now()
			r, err := client.Responses.New(ctx, tooled)
			if err != nil {
				b.Fatal(err)
			}
			bt := time.Since(s)
			own := float64(loopOf(b, r.RawJSON()).ToolExecutions[0].DurationMs)
			added = append(added, float64(bt-a)/1e6-own)
			plainMs = append(plainMs, float64(a)/1e6)
			toolMs = append(toolMs, float64(bt)/1e6)
		}
		perRound = append(perRound, median(added))
	}
	slices.Sort(perRound)
	b.ReportMetric(median(perRound), "ms-added/round")
	b.ReportMetric(perRound[0], "ms-added-min")
	b.ReportMetric(perRound[len(perRound)-1], "ms-added-max")
	b.ReportMetric(median(plainMs), "ms/turn-plain")
	b.ReportMetric(median(toolMs), "ms/turn-1-round")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
