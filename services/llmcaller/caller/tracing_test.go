package caller_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

func TestChatSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	ts, _ := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, HTTPClient: faultSequence("", "status=400")})
	ok := c.Call(context.Background(), caller.Input{TurnID: "t1", Body: simpleBody(t, "x")})
	bad := c.Call(context.Background(), caller.Input{TurnID: "t2", Body: simpleBody(t, "y")})
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	s := spans[0]
	a := attrs(s)
	if s.Name() != "chat sandbox-1" || s.SpanKind() != trace.SpanKindClient || s.InstrumentationScope().Name != caller.TracerName {
		t.Fatalf("span %s kind %v scope %s", s.Name(), s.SpanKind(), s.InstrumentationScope().Name)
	}
	checks := map[attribute.Key]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "sb", "gen_ai.request.model": "sandbox-1",
		"gen_ai.response.id": responseID(t, ok.Body), "gen_ai.response.finish_reasons": `["stop"]`,
	}
	for k, want := range checks {
		if got := a[k].Emit(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if a["gen_ai.usage.input_tokens"].AsInt64() < 1 || a["gen_ai.usage.output_tokens"].AsInt64() < 1 || a["aptix.llm.attempts"].AsInt64() != 1 {
		t.Errorf("usage/attempts %v", a)
	}
	if s.Status().Code == codes.Error {
		t.Errorf("ok span has error status")
	}
	e := spans[1]
	if bad.Error == nil || e.Status().Code != codes.Error || attrs(e)["error.type"].AsString() != "invalid_request_error" || attrs(e)["http.response.status_code"].AsInt64() != 400 {
		t.Errorf("error span status %v attrs %v", e.Status(), attrs(e))
	}
}
