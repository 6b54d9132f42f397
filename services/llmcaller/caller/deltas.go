package caller

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Delta types.
const (
	DeltaText      = "text"
	DeltaArguments = "arguments"
	DeltaDone      = "done"
	// DeltaRetrieval says the turn's retrieval is done, before the model
	// is called: Text is the query, Sources the chunks the context holds.
	DeltaRetrieval = "retrieval"
)

// DeltaSink receives a streaming call's deltas as they arrive. Delta must not
// block for long: it runs inside the stream's read loop.
type DeltaSink interface {
	Delta(ctx context.Context, d Delta)
}

// Delta is one piece of a streamed answer. Text carries the text or the
// arguments fragment; CallID and Name identify the function call an
// arguments delta belongs to. The last delta of a call has Type "done" and
// Status set to the outcome.
type Delta struct {
	Type   string `json:"type"`
	ItemID string `json:"itemId,omitempty"`
	CallID string `json:"callId,omitempty"`
	Name   string `json:"name,omitempty"`
	Text   string `json:"text,omitempty"`
	Seq    int    `json:"seq"`
	// UpstreamSeq is, for a call in background mode (capability reattach),
	// the sequence number of the upstream event the delta came from. After
	// a crash the re-attached call relays its deltas again from the start,
	// with the same UpstreamSeq: a client drops any not above the last it
	// saw. (A redelivery in the same process resumes without repeats.)
	UpstreamSeq int `json:"upstreamSeq,omitempty"`
	// Round is the tool loop's round of the call (0 for a turn's first
	// call): each call numbers its upstream events from the start, so a
	// client compares UpstreamSeq within a round only.
	Round int `json:"round,omitempty"`
	// Status (done only): completed | incomplete | failed | error | cached.
	Status string `json:"status,omitempty"`
	// Error (done only) is the failure message, if the call failed.
	Error string `json:"error,omitempty"`
	// Sources (retrieval only) are the chunks the context block holds.
	Sources []contracts.SourceRef `json:"sources,omitempty"`
}

// NATSDeltas publishes deltas as JSON on aptix.delta.<conversation>.<turn>
// with core NATS (not stored): they are a live view, the stored result is the
// record. The trace context travels in lowercase W3C headers.
func NATSDeltas(nc *nats.Conn, conversationID, turnID string) DeltaSink {
	return natsDeltas{nc: nc, subject: contracts.DeltaSubject(conversationID, turnID)}
}

type natsDeltas struct {
	nc      *nats.Conn
	subject string
}

func (n natsDeltas) Delta(ctx context.Context, d Delta) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	msg := nats.NewMsg(n.subject)
	msg.Data = b
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	for k, v := range carrier {
		msg.Header.Set(k, v)
	}
	// Core publish is fire-and-forget; a lost delta is recovered from the
	// final result, so the error is not worth failing the call for.
	_ = n.nc.PublishMsg(msg)
}

// LoopDeltas relays a tool loop's call: every delta marked with its round,
// and no arguments of calls to server-side tools, which the client sees as
// mcp_call items once the toolrunner runs them.
func LoopDeltas(sink DeltaSink, l *contracts.ToolLoop) DeltaSink { return loopDeltas{sink, l} }

type loopDeltas struct {
	sink DeltaSink
	loop *contracts.ToolLoop
}

func (r loopDeltas) Delta(ctx context.Context, d Delta) {
	if _, ok := r.loop.ServerTool(d.Name); ok && d.Type == DeltaArguments {
		return
	}
	d.Round = r.loop.Round
	r.sink.Delta(ctx, d)
}
