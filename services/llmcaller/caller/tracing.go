package caller

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// startSpan opens the CLIENT span "chat <model>" with the OTel GenAI
// semantic-convention attributes known before the call.
func (c *Caller) startSpan(ctx context.Context, p profiles.Profile, model string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", provider(p)),
		attribute.String("gen_ai.request.model", model),
		attribute.String("aptix.backend", p.Name),
		attribute.Bool("aptix.sandbox", p.Sandbox),
	}
	if u, err := url.Parse(p.BaseURL); err == nil && u.Hostname() != "" {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
		if port, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, attribute.Int("server.port", port))
		}
	}
	return c.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// provider is "openai" for OpenAI's own API and the profile name otherwise,
// since any OpenAI-compatible server can sit behind a profile.
func provider(p profiles.Profile) string {
	if u, err := url.Parse(p.BaseURL); err == nil && u.Hostname() == "api.openai.com" {
		return "openai"
	}
	return p.Name
}

// endSpan records what the response and the attempts tell.
func endSpan(span trace.Span, res contracts.LLMResult, docs *bodies) {
	span.SetAttributes(attribute.Int("aptix.llm.attempts", res.Attempts))
	if res.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", res.Status))
	}
	if s, ok := docs.of(res.Body); ok && res.Status >= 200 && res.Status < 300 {
		in, out := s.Usage.Tokens()
		span.SetAttributes(
			attribute.String("gen_ai.response.id", s.ID),
			attribute.String("gen_ai.response.model", s.Model),
			attribute.Int("gen_ai.usage.input_tokens", in),
			attribute.Int("gen_ai.usage.output_tokens", out),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{s.FinishReason()}),
		)
	}
	if res.Error != nil {
		typ := res.Error.Type
		if typ == "" {
			typ = strconv.Itoa(res.Status)
		}
		span.SetAttributes(attribute.String("error.type", typ))
		span.SetStatus(codes.Error, res.Error.Message)
	}
}
