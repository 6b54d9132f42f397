package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Metrics are recorded by the stage runtime, where every turn
// passes, from what the turn itself carries: the mapper's output holds the
// model call (backend, model, duration, pay-once) and the mapped usage, so
// no service needs its own instrumentation. Names follow the OTel semantic
// conventions where one exists (gen_ai.client.*, messaging.process.duration)
// and are aptix.* otherwise. Exporters come from OTEL_METRICS_EXPORTER
// (otlp|prometheus|console|none; unset: none); prometheus serves /metrics
// on OTEL_EXPORTER_PROMETHEUS_HOST:OTEL_EXPORTER_PROMETHEUS_PORT
// (localhost:9464 by default).

// setupMetrics installs the global meter provider when an exporter is asked for.
func setupMetrics(ctx context.Context, res *resource.Resource) (func(context.Context) error, error) {
	if os.Getenv("OTEL_METRICS_EXPORTER") == "" {
		return func(context.Context) error { return nil }, nil
	}
	reader, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("metric reader from OTEL_METRICS_EXPORTER: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	otel.SetMeterProvider(mp)
	return mp.Shutdown, nil
}

// instruments are created once from the global meter provider (which
// forwards to the SDK's once one is installed, even if that is later).
type instruments struct {
	tokens, opDuration, process metric.Float64Histogram
	turns, payOnce              metric.Int64Counter
}

var (
	instOnce sync.Once
	inst     instruments
)

func meters() *instruments {
	instOnce.Do(func() {
		m := otel.Meter(tracing.Name)
		inst.tokens, _ = m.Float64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
			metric.WithDescription("Tokens used by a model call, by gen_ai.token.type (input, output)"),
			metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576))
		inst.opDuration, _ = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
			metric.WithDescription("Duration of a turn's model call, retries included"),
			metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
		inst.process, _ = m.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
			metric.WithDescription("Time a stage took to handle one event"))
		inst.turns, _ = m.Int64Counter("aptix.turns", metric.WithUnit("{turn}"),
			metric.WithDescription("Completed turns by kind and error code"))
		inst.payOnce, _ = m.Int64Counter("aptix.llm.pay_once.hits", metric.WithUnit("{call}"),
			metric.WithDescription("Model results served from the pay-once store instead of a new call"))
	})
	return &inst
}

// observeProcess records one handled event of a stage.
func observeProcess(ctx context.Context, stage, in string, start time.Time, errType string) {
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "nats"), attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", contracts.StageFilter(in)),
		attribute.String("messaging.consumer.group.name", layout.Durable(stage)),
	}
	if errType != "" {
		attrs = append(attrs, attribute.String("error.type", errType))
	}
	meters().process.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
}

// observeCompleted counts a turn's completion by kind and error code.
func observeCompleted(ctx context.Context, t *contracts.Turn) {
	if r := t.Response; r != nil {
		meters().turns.Add(ctx, 1, metric.WithAttributes(attribute.String("aptix.turn.kind", r.Kind), attribute.String("error.type", r.ErrorCode)))
	}
}

// observeCall records the model call the llmcaller just made (its
// responded event): duration, tokens from the upstream body's usage, or a
// pay-once hit. Recorded here, not at completion, so a replay from the
// mapper, which re-maps a stored result, does not count the call again.
// ObserveCall records a model call's metrics for a stage that found its
// result already stored (Output, Emitted): the runtime publishes nothing
// then, so it records nothing either. A cached result counts a pay-once hit.
func ObserveCall(ctx context.Context, t *contracts.Turn) { observeCall(ctx, t) }

func observeCall(ctx context.Context, t *contracts.Turn) {
	if t.LLM == nil {
		return
	}
	m := meters()
	var body struct {
		Model string `json:"model"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if t.LLM.Body != "" {
		_ = json.Unmarshal([]byte(t.LLM.Body), &body)
	}
	call := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", t.LLM.Backend),
		attribute.String("gen_ai.request.model", t.LLM.Model),
	}
	if body.Model != "" {
		call = append(call, attribute.String("gen_ai.response.model", body.Model))
	}
	if t.LLM.Cached {
		m.payOnce.Add(ctx, 1, metric.WithAttributes(call...))
		return // the call, its tokens and duration were recorded when it was made
	}
	dur := call
	if t.LLM.Error != nil {
		dur = append(append([]attribute.KeyValue{}, call...), attribute.String("error.type", orDefault(t.LLM.Error.Type, "upstream_error")))
	}
	m.opDuration.Record(ctx, t.LLM.DurationMs/1000, metric.WithAttributes(dur...))
	if u := body.Usage; u.InputTokens > 0 || u.OutputTokens > 0 {
		in := append(append([]attribute.KeyValue{}, call...), attribute.String("gen_ai.token.type", "input"))
		out := append(append([]attribute.KeyValue{}, call...), attribute.String("gen_ai.token.type", "output"))
		m.tokens.Record(ctx, float64(u.InputTokens), metric.WithAttributes(in...))
		m.tokens.Record(ctx, float64(u.OutputTokens), metric.WithAttributes(out...))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// registerStageCounters exports a stage's processed, rejected, retried and
// dead-lettered counts (the micro stats) as aptix.stage.events{outcome}:
// one callback per stage runner, registered separately (a callback passed
// when the instrument is created is dropped when the instrument already
// exists). The instrument is looked up at each registration, not cached, so
// it belongs to the meter provider installed now. It returns the
// unregistration, for when the stage stops.
func registerStageCounters(r *runner) func() {
	meter := otel.Meter(tracing.Name)
	events, err := meter.Int64ObservableCounter("aptix.stage.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events a stage handled, by outcome: processed, rejected, retried, dead_lettered"))
	if err != nil {
		return func() {}
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for outcome, n := range r.counts() {
			o.ObserveInt64(events, n, metric.WithAttributes(attribute.String("aptix.stage", r.st.Name), attribute.String("aptix.outcome", outcome)))
		}
		return nil
	}, events)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}

// errorType is the error.type of a handled event: "" when it was handled
// (passed on or answered), else "retry" (it will be redelivered).
func errorType(err error) string {
	if err == nil {
		return ""
	}
	return "retry"
}
