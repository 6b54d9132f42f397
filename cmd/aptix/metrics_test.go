package main

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestMetricsAfterKnownTurns: after two answered turns, a replay from the
// mapper (no new call) and a dead-lettered turn, the metrics say exactly
// that: tokens equal to the sandbox's usage of the two calls, two call
// durations, three ok turns and one stage_failed, one retriever dead letter.
func TestMetricsAfterKnownTurns(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	d := newDebugStack(t)
	var in, out int64
	for _, id := range []string{"m1", "m2"} {
		r := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-m", TurnId: id, Instruction: "count my tokens " + id}).Response
		in, out = in+int64(r.Usage.PromptTokens), out+int64(r.Usage.CompletionTokens)
	}
	d.replay(replayFlags{conversation: "c-m", turn: "m1", from: "mapper", newTurn: "m1-map"})
	d.indexDown.Store(true)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-m", TurnId: "m3", Instruction: "dead"})

	// A stage records a completion once its publish is acknowledged, which
	// can be just after the client has read it: collect until the figures
	// settle (or the deadline shows what they were).
	var (
		tokens map[string]int64
		calls  uint64
		turns  map[string]int64
		dead   int64
	)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tokens, calls, turns, dead = collectMetrics(t, reader)
		if (tokens["input"] == in && calls == 2 && turns["ok/"] == 3 && turns["error/stage_failed"] == 1 && dead == 1 && turns["unpriced sandbox-1"] == 2) || time.Now().After(deadline) {
			break
		}
	}
	if in == 0 || tokens["input"] != in || tokens["output"] != out {
		t.Fatalf("token usage %v, want input %d output %d (the sandbox's)", tokens, in, out)
	}
	if calls != 2 {
		t.Fatalf("%d model call durations, want 2 (the mapper replay makes no call)", calls)
	}
	if turns["ok/"] != 3 || turns["error/stage_failed"] != 1 {
		t.Fatalf("turns %v", turns)
	}
	// Counted when folded into the usage totals: the two answered turns,
	// not the mapper replay (no model call) nor the dead-lettered turn.
	if turns["unpriced sandbox-1"] != 2 {
		t.Fatalf("aptix.usage.unpriced_turns %v, want 2 for sandbox-1", turns)
	}
	if dead != 1 {
		t.Fatalf("%d retriever dead letters in aptix.stage.events", dead)
	}
}

// collectMetrics reads the figures TestMetricsAfterKnownTurns checks.
func collectMetrics(t *testing.T, reader *sdkmetric.ManualReader) (tokens map[string]int64, calls uint64, turns map[string]int64, dead int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	tokens, turns = map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					switch m.Name {
					case "gen_ai.client.token.usage":
						typ, _ := p.Attributes.Value(attribute.Key("gen_ai.token.type"))
						prov, _ := p.Attributes.Value(attribute.Key("gen_ai.provider.name"))
						if prov.AsString() != "sandbox" {
							t.Errorf("token usage from provider %q", prov.AsString())
						}
						tokens[typ.AsString()] += int64(p.Sum)
					case "gen_ai.client.operation.duration":
						calls += p.Count
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					switch m.Name {
					case "aptix.usage.unpriced_turns":
						model, _ := p.Attributes.Value(attribute.Key("gen_ai.request.model"))
						turns["unpriced "+model.AsString()] += p.Value
					case "aptix.turns":
						kind, _ := p.Attributes.Value(attribute.Key("aptix.turn.kind"))
						code, _ := p.Attributes.Value(attribute.Key("error.type"))
						turns[kind.AsString()+"/"+code.AsString()] += p.Value
					case "aptix.stage.events":
						if testing.Verbose() {
							t.Logf("%s %v = %d", m.Name, p.Attributes.ToSlice(), p.Value)
						}
						st, _ := p.Attributes.Value(attribute.Key("aptix.stage"))
						oc, _ := p.Attributes.Value(attribute.Key("aptix.outcome"))
						if st.AsString() == "retriever" && oc.AsString() == "dead_lettered" {
							dead += p.Value
						}
					}
				}
			}
		}
	}
	return tokens, calls, turns, dead
}
