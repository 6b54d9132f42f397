package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// SetupTelemetry installs the global tracer provider and the W3C TraceContext
// + Baggage propagator. Exporters come from the standard OTEL_* variables
// (OTEL_TRACES_EXPORTER=otlp|console|none); unset means none, so a laptop run
// does not try to reach a collector that is not there. Spans are created
// either way: every event carries a traceparent and every log line a trace id.
func SetupTelemetry(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return func(context.Context) error { return nil }, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_EXPORTER") != "" {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("trace exporter from OTEL_TRACES_EXPORTER: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	stopMetrics, err := setupMetrics(ctx, res) // metrics.go: OTEL_METRICS_EXPORTER
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), stopMetrics(ctx)) }, nil
}

// StartTelemetry is SetupTelemetry for a main function: stop flushes the
// spans still buffered, giving up after 5 s so a dead collector cannot hold
// a process at exit.
func StartTelemetry(ctx context.Context, service string) (stop func(), err error) {
	shutdown, err := SetupTelemetry(ctx, service)
	if err != nil {
		return nil, err
	}
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(c)
	}, nil
}
