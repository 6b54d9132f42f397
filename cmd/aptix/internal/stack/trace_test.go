package stack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestOneTracePerTurn asserts the span tree of a turn: one trace from the
// client's publish through every stage and the LLM call, each consumer span
// a child of the producer span of the event it consumed.
func TestOneTracePerTurn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	e := newEnv(t, sandbox.Options{})
	e.turn(contracts.AgentExecuteRequest{ConversationId: "conv-trace", TurnId: "t1", Mode: "PLAN", Instruction: "trace me", RagScope: contracts.RagScopeNone})
	// The mapper's process span ends just after it published the completion
	// the client has already read: wait for it rather than race it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_ = tp.ForceFlush(context.Background())
		done := false
		for _, s := range exp.GetSpans() {
			done = done || s.Name == "process aptix.responded"
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	byName := map[string]tracetest.SpanStub{}
	var traceID trace.TraceID
	for _, s := range exp.GetSpans() {
		if s.Name == "send aptix.requested" {
			traceID = s.SpanContext.TraceID()
		}
	}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() != traceID {
			continue
		}
		byName[s.Name] = s
	}
	// each consumer span's parent is the producer span of its input event
	for _, hop := range []string{"requested", "retrieved", "enveloped", "responded"} {
		send, ok := byName["send aptix."+hop]
		if !ok {
			t.Fatalf("no span %q in the turn's trace; have %v", "send aptix."+hop, names(byName))
		}
		proc, ok := byName["process aptix."+hop]
		if !ok {
			t.Fatalf("no span %q in the turn's trace", "process aptix."+hop)
		}
		if proc.Parent.SpanID() != send.SpanContext.SpanID() || proc.SpanKind != trace.SpanKindConsumer || send.SpanKind != trace.SpanKindProducer {
			t.Fatalf("process aptix.%s is not a consumer child of its send span", hop)
		}
		if !hasAttr(proc, "messaging.system", "nats") || !hasAttr(proc, "aptix.turn_id", "t1") {
			t.Fatalf("process aptix.%s attributes %v", hop, proc.Attributes)
		}
	}
	if _, ok := byName["send aptix.completed"]; !ok {
		t.Fatal("no completed publish in the trace")
	}
	var chat *tracetest.SpanStub
	for _, s := range byName {
		if s.SpanKind == trace.SpanKindClient && len(s.Name) > 5 && s.Name[:5] == "chat " {
			chat = &s
		}
	}
	if chat == nil {
		t.Fatalf("no chat span in the trace; have %v", names(byName))
	}
	if chat.Parent.SpanID() != byName["process aptix.enveloped"].SpanContext.SpanID() {
		t.Fatal("the chat span is not a child of the llmcaller's process span")
	}
	for _, k := range []string{"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.id", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
		if !hasKey(*chat, k) {
			t.Errorf("chat span lacks %s: %v", k, chat.Attributes)
		}
	}
}

func names(m map[string]tracetest.SpanStub) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func hasKey(s tracetest.SpanStub, key string) bool {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return true
		}
	}
	return false
}

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, a := range s.Attributes {
		if string(a.Key) == key && a.Value.Emit() == value {
			return true
		}
	}
	return false
}

// TestGatewayTrace: a request to the gateway is a server span that is the
// parent of the turn's publish, so one trace runs from the HTTP client
// through the pipeline, and a client's traceparent is honoured.
func TestGatewayTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	req, _ := http.NewRequest("POST", url+"/v1/responses", strings.NewReader(`{"model":"sandbox-1","input":"trace me"}`))
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	_ = tp.ForceFlush(context.Background())
	var server, send tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "POST /v1/responses":
			server = s
		case "send aptix.requested", "send aptix.retrieved", "send aptix.enveloped":
			// The turn's publish at its entry point: a transparent turn's
			// skips the retriever and the envelope
			// (docs/architecture.md#entry-points).
			send = s
		}
	}
	if server.SpanKind != trace.SpanKindServer || server.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("server span %+v", server)
	}
	if send.Parent.SpanID() != server.SpanContext.SpanID() || send.SpanContext.TraceID() != server.SpanContext.TraceID() {
		t.Fatalf("publish span not under the request's: %+v", send.Parent)
	}
}
