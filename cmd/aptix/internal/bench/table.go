package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Table writes the report for a human: one row per measured path, then the
// ratios and the goals.
func Table(w io.Writer, r Report) error {
	fmt.Fprintf(w, "Aptix benchmark, %s, %s, %d CPUs, %s\n", r.When.Format("2006-01-02 15:04 UTC"), r.GoVersion, r.CPUs, r.Storage)
	fmt.Fprintf(w, "event sizes (bytes) requested/retrieved/enveloped/responded/completed: %v; 8 RAG chunks per turn\n\n", r.EventBytes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tconcurrency\tops\tp50 ms\tp90 ms\tp99 ms\tops/s\tCPU ms/op\t")
	row := func(name string, l Load) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.0f\t%.3f\t\n", name, l.Concurrency, l.Ops, l.Latency.P50, l.Latency.P90, l.Latency.P99, l.PerSecond, l.CPUMsPerOp)
	}
	row("direct openai-go → sandbox", r.Direct)
	for _, c := range sortedKeys(r.Chain) {
		row("raw JetStream 5-hop chain", r.Chain[c])
	}
	for _, c := range sortedKeys(r.Aptix) {
		row("aptix turn", r.Aptix[c])
	}
	for _, c := range sortedKeys(r.AptixChat) {
		row("aptix turn, chat completions backend", r.AptixChat[c])
	}
	for _, c := range sortedKeys(r.Gateway) {
		row("gateway: openai-go → HTTP → aptix", r.Gateway[c])
	}
	for _, c := range sortedKeys(r.HTTPFloor) {
		row("HTTP floor: openai-go → canned reply", r.HTTPFloor[c])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nchain msgs/s (5 per chain): ")
	for _, c := range sortedKeys(r.Chain) {
		fmt.Fprintf(w, "c%d %.0f  ", c, 5*r.Chain[c].PerSecond)
	}
	fmt.Fprintf(w, "\nadded latency (aptix − direct) at concurrency 1: p50 %.3f ms, p99 %.3f ms; aptix p50 / chain p50 = %.2f\n",
		r.Ratios.AddedLatencyP50Ms, r.Ratios.AddedLatencyP99Ms, r.Ratios.LatencyVsChainP50)
	if len(r.StageMsC1) > 0 {
		fmt.Fprintf(w, "stage handling at concurrency 1, ms per event (handler, its store round trips, its publish): %s\n", stageFigures(r.StageMsC1, ", ", ""))
	}
	if r.TimelineC1.Turns > 0 {
		fmt.Fprintf(w, "a turn's critical path at concurrency 1, from the events' stored times: %s\n", r.TimelineC1)
	}
	for _, c := range sortedKeys(r.Ratios.ThroughputVsChain) {
		fmt.Fprintf(w, "throughput aptix / chain at concurrency %d: %.2f (CPU per op chain / aptix: %.2f; Aptix's own CPU per turn beyond the chain and the direct call: %.3f ms)\n",
			c, r.Ratios.ThroughputVsChain[c], r.Ratios.CPUChainOverAptix[c], r.Aptix[c].CPUMsPerOp-r.Chain[c].CPUMsPerOp-r.Direct.CPUMsPerOp)
	}
	if len(r.AptixChat) > 0 {
		fmt.Fprintf(w, "chat completions backend added (chat row − aptix row, the translation both ways) at concurrency 1: p50 %.3f ms, CPU %.3f ms per turn\n",
			r.Ratios.ChatAddedP50Ms, r.Ratios.ChatAddedCPUMs)
	}
	if r.WritesSplit.Turns > 0 {
		fmt.Fprintf(w, "durable writes per turn at concurrency 1 (messages stored, counted by the server), bus path: %s\n", r.WritesSplit)
	}
	if r.GatewayWritesSplit.Turns > 0 {
		fmt.Fprintf(w, "durable writes per turn at concurrency 1, gateway path (the answer: the HTTP response returned): %s\n", r.GatewayWritesSplit)
	}
	if r.Writes.PerOp > 0 {
		fmt.Fprintf(w, "durable writes per turn in all, over the %d turns of the concurrency-1 run, bus path: %s\n", r.Aptix[1].Ops, r.Writes)
	}
	if r.GatewayWrites.PerOp > 0 {
		fmt.Fprintf(w, "durable writes per turn in all, over the %d turns of the concurrency-1 run, gateway path: %s\n", r.Gateway[1].Ops, r.GatewayWrites)
	}
	fmt.Fprintf(w, "gateway added latency (gateway − bus) at concurrency 1: p50 %.3f ms\n", r.Ratios.GatewayAddedP50Ms)
	for _, c := range sortedKeys(r.Ratios.GatewayVsBus) {
		fmt.Fprintf(w, "throughput gateway / bus at concurrency %d: %.2f\n", c, r.Ratios.GatewayVsBus[c])
	}
	if tl := r.ToolLoop; tl.Rounds > 0 {
		fmt.Fprintf(w, "tool loop, %d client-side rounds, concurrency 1, %d loops each (s per loop, p10 / median / p90): WebSocket %.3f / %.3f / %.3f, HTTP+SSE %.3f / %.3f / %.3f; WebSocket / HTTP = %.2f\n",
			tl.Rounds, tl.Loops, tl.WS.P10, tl.WS.Median, tl.WS.P90, tl.HTTP.P10, tl.HTTP.Median, tl.HTTP.P90, tl.TimeRatio)
		fmt.Fprintf(w, "tool loop at concurrency %d, %d interleaved phases (responses/s, min / median / max): WebSocket %.0f / %.0f / %.0f, HTTP+SSE %.0f / %.0f / %.0f; WebSocket / HTTP = %.2f\n",
			tl.Concurrency, tl.Reps, tl.WSThroughput.Min, tl.WSThroughput.Median, tl.WSThroughput.Max, tl.HTTPThroughput.Min, tl.HTTPThroughput.Median, tl.HTTPThroughput.Max, tl.ThroughputRatio)
	}
	fmt.Fprintf(w, "peak RSS of the process (NATS server, sandbox and stages included): %.1f MiB\n", r.PeakRSSMiB)
	s := r.Soak
	if s.Turns > 0 {
		fmt.Fprintf(w, "soak: %d turns in flight, model latency %.0f ms: %d completed, %d duplicates, %d upstream calls (max %d at once), turn p50 %.1f ms p99 %.1f ms, added p99 %.1f ms, %.1f s\n",
			s.Turns, s.ModelLatencyMs, s.Completed, s.Duplicates, s.UpstreamCalls, s.MaxUpstreamInFly, s.Latency.P50, s.Latency.P99, s.AddedLatencyP99, s.Seconds)
		fmt.Fprintf(w, "soak peak RSS (its own process: embedded nats-server, four stages, the client; sandbox out of process: %v): %.1f MiB\n", s.SandboxOutOfProcess, s.PeakRSSMiB)
	}
	names := make([]string, 0, len(r.Goals))
	for g := range r.Goals {
		names = append(names, g)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\ngoals:")
	for _, g := range names {
		mark := "MISSED"
		if r.Goals[g] {
			mark = "met"
			if n := metNote(g, r); n != "" {
				mark += " " + n
			}
		} else if c := missCause(g, r); c != "" {
			mark += ": " + c
		}
		fmt.Fprintf(w, "  %-32s %s\n", g, mark)
	}
	return nil
}

// stageFigures lists a figure per stage of the main line, in order
// (layout.MainNames): "retriever 0.120, envelope 0.080, llmcaller 1.200
// (model call included), mapper 0.090". A stage that waits on more than
// the bus (not Local: the LLM caller) includes its model call.
func stageFigures(ms map[string]float64, sep, unit string) string {
	var parts []string
	for _, st := range layout.MainLine() {
		p := fmt.Sprintf("%s %.3f", st.Name, ms[st.Name])
		if !st.Local {
			p += " (model call included)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, sep) + unit
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// missCause says, from this run's own figures, why a goal was missed.
func missCause(goal string, r Report) string {
	a1, d, ch := r.Aptix[1], r.Direct, r.Chain[1]
	switch goal {
	case "addedLatencyP50<=0.5ms":
		st := r.StageMsC1
		return fmt.Sprintf("p50 %.3f ms over the direct call's %.3f; the five-hop bus floor alone is %.3f ms here (so the goal leaves %.3f ms for four stages' decoding, handling and store round trips), and the stages' handling (store round trips, JSON, publish) is %s",
			a1.Latency.P50, d.Latency.P50, ch.Latency.P50, 0.5-ch.Latency.P50, stageFigures(st, " + ", " ms")) + timelineNote(r.TimelineC1)
	case "throughput>=90%ofCeiling64", "throughput>=90%ofCeiling256", "cpuPerTurn<=1.5xChain64", "cpuPerTurn<=1.5xChain256":
		c := 64
		if strings.HasSuffix(goal, "256") {
			c = 256
		}
		return fmt.Sprintf("CPU-bound on %d cores: a turn costs %.3f ms of CPU (stages, nats-server, the in-process sandbox) against the chain's %.3f ms (%.2f×). A turn also makes the model call, whose CPU on these cores (openai-go and the sandbox) the direct call measures at %.3f ms, so no pipeline could exceed chain / (chain + direct) = %.2f of the chain's rate here (measured %.2f); Aptix's own CPU beyond both floors is %.3f ms per turn",
			r.CPUs, r.Aptix[c].CPUMsPerOp, r.Chain[c].CPUMsPerOp, ratio(r.Aptix[c].CPUMsPerOp, r.Chain[c].CPUMsPerOp), d.CPUMsPerOp, ceiling(r, c), r.Ratios.ThroughputVsChain[c], r.Aptix[c].CPUMsPerOp-r.Chain[c].CPUMsPerOp-d.CPUMsPerOp)
	case "gatewayOverDirectP50<=1.0ms", "gatewayOwnCPU<=0.15ms":
		f := r.HTTPFloor[1]
		return fmt.Sprintf("gateway p50 %.3f ms over the direct call's %.3f, of which the bus path is %.3f; CPU per turn %.3f vs the bus path's %.3f ms. The same request and response over HTTP with openai-go, answered by a canned handler, alone take p50 %.3f ms and %.3f ms of CPU; the gateway's own work (parsing, translation, the completion watch, building the answer) adds %.3f ms of latency and %.3f ms of CPU beyond that floor and the bus path",
			r.Gateway[1].Latency.P50, d.Latency.P50, a1.Latency.P50, r.Gateway[1].CPUMsPerOp, a1.CPUMsPerOp, f.Latency.P50, f.CPUMsPerOp,
			r.Gateway[1].Latency.P50-a1.Latency.P50-f.Latency.P50, gatewayOwnCPU(r, 1))
	case "durableWritesPerTurn<=6":
		return writesNote(r.Writes, r.WritesSplit)
	case "gatewayDurableWritesPerTurn<=6":
		return writesNote(r.GatewayWrites, r.GatewayWritesSplit)
	case "soakPeakRSS<=1GiB":
		return fmt.Sprintf("peak RSS %.1f MiB", r.Soak.PeakRSSMiB)
	}
	return ""
}

// metNote qualifies a met goal where the figure it judges is not the whole
// story: the writes goals judge the critical path, and say what was written
// after the answer.
func metNote(goal string, r Report) string {
	switch goal {
	case "durableWritesPerTurn<=6":
		return writesNote(r.Writes, r.WritesSplit)
	case "gatewayDurableWritesPerTurn<=6":
		return writesNote(r.GatewayWrites, r.GatewayWritesSplit)
	}
	return ""
}

// writesNote states the writes goal's figure: those before the answer, then
// those after it, and a total over 6 in so many words.
func writesNote(total Writes, s Split) string {
	if s.Turns == 0 {
		return "stored per turn: " + total.String()
	}
	note := fmt.Sprintf("on the critical path: the median turn stores %d before its answer (the mean, which a writer on a clock such as the queue's keeper can land in: %s)", s.MedianBefore, s.Before)
	if s.After.PerOp == 0 {
		return note + ", none after it"
	}
	note += fmt.Sprintf("; %s more after it", s.After)
	if all := s.Before.PerOp + s.After.PerOp; all > 6 {
		note += fmt.Sprintf(", %.2f in all (over 6)", all)
	}
	return note
}
