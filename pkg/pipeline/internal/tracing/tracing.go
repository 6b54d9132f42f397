// Package tracing holds what the stage runtime, the client and the stores
// share to trace NATS events and name their telemetry: one instrumentation
// scope, the messaging attributes of an event and a case-keeping header
// carrier.
package tracing

import (
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of the pipeline's spans and metrics. It
// stays the runtime's import path: spans and metrics keep the scope they had
// before the stores and the client had packages of their own.
const Name = "github.com/aptix-dev/aptix/pkg/pipeline"

// Tracer is the pipeline's tracer.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// HeaderCarrier adapts nats.Header to OTel propagation without changing the
// key's case: propagation.HeaderCarrier would write "Traceparent", and NATS
// headers are case-sensitive (docs/architecture.md#subjects-and-headers).
type HeaderCarrier nats.Header

func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// MessagingAttrs are the OTel messaging attributes of a NATS event.
func MessagingAttrs(op, subject, msgID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"),
		semconv.MessagingOperationTypeKey.String(op),
		semconv.MessagingDestinationName(subject),
		semconv.MessagingMessageID(msgID),
	}
}
