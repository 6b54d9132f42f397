// Package stage binds retrieval to the bus: it turns aptix.requested events
// (a client's AgentExecuteRequest) into aptix.retrieved events. As the first
// stage it also validates the request, so a bad one is answered at once.
package stage

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
)

const tracerName = "github.com/aptix-dev/aptix/services/retriever/stage"

// Searcher finds the chunks for a request.
type Searcher interface {
	Search(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error)
}

// SearchFunc adapts a function to Searcher.
type SearchFunc func(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error)

// Search calls f.
func (f SearchFunc) Search(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
	return f(ctx, req)
}

// Retriever validates the request and retrieves its context.
type Retriever struct {
	// Searcher is nil when no index is configured: turns go on without context.
	Searcher Searcher
}

// Stage returns the pipeline stage.
func (r *Retriever) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved, Handle: r.Handle}
}

// Handle validates the request and fills turn.Retrieval.
func (r *Retriever) Handle(ctx context.Context, t *contracts.Turn) error {
	if err := t.Request.Validate(); err != nil {
		var ve *contracts.ValidationError
		if errors.As(err, &ve) {
			return pipeline.Reject(pipeline.CodeInvalidRequest, "%v", err)
		}
		return err
	}
	scope := t.Request.RagScope
	if scope == "" {
		scope = contracts.RagScopeWorkspace
	}
	if scope == contracts.RagScopeNone || r.Searcher == nil {
		t.Retrieval = &contracts.Retrieval{Scope: scope, Chunks: []contracts.RagChunk{}}
		return nil
	}
	index := t.Request.WorkspaceId
	if ac := t.Request.AgentContext; ac != nil && ac.Index != "" {
		index = ac.Index
	}
	ctx, span := otel.Tracer(tracerName).Start(ctx, "retrieval "+index, trace.WithAttributes(
		attribute.String("aptix.rag.scope", scope), attribute.String("aptix.rag.index", index)))
	defer span.End()
	res, err := r.Searcher.Search(ctx, t.Request)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err // the index may be catching up: retried with backoff
	}
	if res.Index != "" && res.Index != index {
		span.SetName("retrieval " + res.Index) // the searcher resolved a default index
		span.SetAttributes(attribute.String("aptix.rag.index", res.Index))
	}
	span.SetAttributes(attribute.Int("aptix.rag.chunks", len(res.Chunks)), attribute.Float64("aptix.rag.took_ms", res.TookMs))
	if res.Chunks == nil {
		res.Chunks = []contracts.RagChunk{}
	}
	t.Retrieval = &res
	return nil
}
