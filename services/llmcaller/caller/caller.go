// Package caller sends a turn's /responses body to an OpenAI-compatible
// backend with openai-go and returns the outcome as data
// (contracts.LLMResult): retries with backoff that honours Retry-After,
// per-attempt and per-turn timeouts, a concurrency limit per backend, the raw
// body kept verbatim, pay-once storage by turn key, replayed history for
// backends without previous_response_id, streaming deltas, tool-call
// emulation for backends without function calling (emulate.go) and a
// gen_ai span.
// It has no bus dependency except the optional NATS delta sink and the
// JetStream stores, which implement interfaces declared here.
package caller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/redact"
	"github.com/aptix-dev/aptix/services/llmcaller/anthropicmessages"
	"github.com/aptix-dev/aptix/services/llmcaller/chatcompletions"
)

// TracerName is the instrumentation scope of the caller's spans.
const TracerName = "github.com/aptix-dev/aptix/services/llmcaller"

// Options configure a Caller. Every field is optional.
type Options struct {
	// Results enables pay-once: the call record (started.go) and, unless
	// the one calling keeps it (Input.Stored), the final result are stored
	// by the call's key (Input.TurnID), and a repeated call returns the
	// stored result.
	Results ResultStore
	// History keeps conversation items replayed as input for backends
	// without previous_response_id. Recovery (recover.go) also reads the
	// records earlier releases kept there for every backend.
	History HistoryStore
	// Calls is where recovery reads a conversation's earlier model calls
	// when a backend that threads by previous_response_id has lost the
	// response a turn continues from (recover.go): the stage reads the
	// conversation's events. Nil: only History's old records are followed.
	Calls CallLog
	// HTTPClient carries the requests; default a client that keeps up to 1024 idle connections per host.
	HTTPClient *http.Client
	// Logger; default slog.Default().
	Logger *slog.Logger
	// BaseBackoff is the first retry wait when the server names none (default 500ms).
	BaseBackoff time.Duration
	// MaxBackoff caps the computed retry wait (default 8s). A server's
	// Retry-After is honoured as sent, bounded only by the turn deadline.
	MaxBackoff time.Duration
	// Hop is this deployment's mark (pipeline.DeploymentMark), sent as
	// contracts.HeaderHop on every backend call so a gateway of the same
	// deployment refuses it as a loop. Empty sends none.
	Hop string
}

// Caller calls backends named by profiles. It is safe for concurrent use.
type Caller struct {
	set    *profiles.Set
	o      Options
	log    *slog.Logger
	tracer trace.Tracer

	mu       sync.Mutex
	sems     map[string]chan struct{}
	clients  map[string]openai.Client
	flights  map[string]*flight
	progress map[string]progress // interrupted calls' relayed deltas (started.go)

	stats counters
}

// New returns a Caller over the profiles in set.
func New(set *profiles.Set, o Options) *Caller {
	if o.HTTPClient == nil {
		o.HTTPClient = pooledClient()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 8 * time.Second
	}
	return &Caller{
		set: set, o: o, log: o.Logger.With("component", "llmcaller"), tracer: otel.Tracer(TracerName),
		sems: map[string]chan struct{}{}, clients: map[string]openai.Client{}, flights: map[string]*flight{},
		progress: map[string]progress{},
	}
}

// Input is one turn's call.
type Input struct {
	ConversationID string
	// ContinuationConversation is the conversation the body's
	// previous_response_id was made in, when another than ConversationID
	// (contracts.AgentExecuteRequest.ContinuationConversation): recovery
	// reads its calls too.
	ContinuationConversation string
	// TurnID is the call's pay-once key: its result, call record and
	// in-process flight are kept under it. The stage passes
	// contracts.CallKey (conversation, turn and tool-loop round): clients
	// choose turn ids, and a key of the turn id alone would answer one
	// conversation's turn with another's paid result.
	TurnID string
	// LegacyKey, when set, is where a caller before keys named the
	// conversation kept this call's record (the turn id alone). It is never
	// read as an answer, only to warn that a redelivery of an event from
	// before the upgrade calls the model again (legacyRecord).
	LegacyKey string
	// Backend names the profile; "" is the set's default.
	Backend string
	// Model is resolved through the profile's aliases; the body's own "model"
	// is sent as is.
	Model string
	// Body is the /responses request body, sent as is apart from what the
	// call must change ("stream"; "background" and "store" where the
	// backend re-attaches; the replayed history for a backend without
	// previous_response_id; a truncated input): only those members are
	// written anew, the rest goes byte for byte (body.go).
	Body json.RawMessage
	// Stream calls with SSE and hands deltas to Deltas (which may be nil).
	Stream bool
	Deltas DeltaSink
	// Emulation, when set, emulates function calling for a backend without
	// it (emulate.go): the model's <tool_call> blocks become function_call
	// items in the result, and streamed text never shows them.
	Emulation *contracts.ToolEmulation
	// FirstDelivery tells that the bus delivers the call's event for the
	// first time (pipeline.Delivered == 1): no earlier delivery can have
	// left a result or call record, so the pay-once lookup is skipped. The
	// call record is then written create-if-absent before the request, so a
	// key that is taken after all (a replay of a paid turn) is still found:
	// the call goes back to the lookup before anything is sent.
	FirstDelivery bool
	// Stored, when set, finds the call's final result where the one who
	// calls keeps it (the LLM caller stage: its output event), or nil and
	// no error when it is not there. The result is then not written to
	// Options.Results, which keeps only the call record, and a pay-once
	// lookup asks Stored before it reads the record.
	Stored func(ctx context.Context) (*contracts.LLMResult, error)
	// Fallback numbers a call made on a fallback profile (1 for the first
	// fallback; docs/backends.md#fallbacks), 0 for the turn's own: its span
	// says it (aptix.fallback), so a trace shows each attempt.
	Fallback int
}

// Call performs the turn's call and returns its result. Upstream failures
// (HTTP errors, malformed bodies, timeouts, dropped connections) are data in
// the result, never a panic or Go error; when ctx itself was cancelled the
// result carries an error and ctx.Err() tells the caller why.
func (c *Caller) Call(ctx context.Context, in Input) contracts.LLMResult {
	res, again := c.call(ctx, in)
	if again {
		// A first delivery skipped the lookup and its call record found the
		// key taken: look it up as a redelivery does. Nothing was sent.
		in.FirstDelivery = false
		res, _ = c.call(ctx, in)
	}
	return res
}

// call is Call; again reports that a first delivery's unchecked call record
// found the turn's key taken, before any request was sent.
func (c *Caller) call(ctx context.Context, in Input) (res contracts.LLMResult, again bool) {
	start := time.Now()
	res = contracts.LLMResult{Backend: in.Backend, Model: in.Model, Streamed: in.Stream}
	var t *turn
	docs := &bodies{}  // the response body, decoded once for every reader below
	var prior *Started // the call record an earlier delivery left (started.go)
	var rev uint64
	defer func() {
		if r := recover(); r != nil {
			res.Error = &contracts.UpstreamError{Type: "aptix_internal", Message: fmt.Sprintf("llmcaller: internal error: %v", r)}
			c.log.Error("llmcaller panic recovered", "turn", in.TurnID, "panic", r)
		}
		if res.DurationMs == 0 {
			// Early returns; a called result already has the duration it was
			// stored with, and a cached one keeps the call that paid for it.
			res.DurationMs = float64(time.Since(start).Microseconds()) / 1000
		}
		if in.Stream && in.Deltas != nil && !again {
			seq := 0
			if t != nil {
				seq = t.seq
			}
			c.done(ctx, in, res, seq, docs)
		}
	}()
	prof, err := c.set.Get(in.Backend)
	if err != nil {
		res.Error = &contracts.UpstreamError{Type: "aptix_config", Message: err.Error()}
		return res, false
	}
	res.Backend, res.Model = prof.Name, prof.Model(in.Model)
	log := c.log.With("turn", in.TurnID, "conversation", in.ConversationID, "backend", prof.Name, "model", res.Model)
	if prof.Sandbox {
		log = log.With("sandbox", true)
	}

	unchecked := in.FirstDelivery && c.records() != nil
	if in.TurnID != "" {
		cached, f := c.claim(ctx, in.TurnID, in.Stored, unchecked, log)
		if cached != nil {
			return *cached, false
		}
		if f == nil {
			res.Error = &contracts.UpstreamError{Type: "cancelled", Message: fmt.Sprintf("call cancelled while the same turn was in flight: %v", ctx.Err())}
			return res, false
		}
		defer func() { c.release(in.TurnID, f, res, t != nil && t.final) }()
		prior, rev = f.started, f.rev
		if prior == nil && !unchecked && in.LegacyKey != "" {
			c.legacyRecord(ctx, in.LegacyKey, log)
		}
	}

	ctx, span := c.startSpan(ctx, prof, res.Model)
	defer span.End()
	if in.Fallback > 0 {
		span.SetAttributes(attribute.Int("aptix.fallback", in.Fallback))
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		log = log.With("trace_id", sc.TraceID().String())
	}
	t = &turn{c: c, parent: ctx, prof: prof, in: in, log: log, red: redact.New(prof.Credentials()...), names: map[string]fnCall{}, filters: map[string]*textFilter{},
		prior: prior, upSeq: -1, relayed: -1, skip: -1, docs: docs}
	if recs := c.records(); recs != nil && in.TurnID != "" {
		t.rec = &startLog{store: recs, turnID: in.TurnID, rev: rev}
		t.unchecked = unchecked
	}
	if p, ok := c.takeProgress(in.TurnID); ok && prior != nil && p.responseID == prior.ResponseID {
		t.relayed, t.seq = p.relayed, p.seq
	}
	final := t.run(&res) && ctx.Err() == nil
	if t.conflict {
		log.Info("the turn's pay-once key is taken although this is the event's first delivery; looking it up")
		return res, true
	}
	t.final = final
	res.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	endSpan(span, res, docs)
	if t.rec != nil {
		// The record goes before the result, which replaces it.
		if err := t.rec.wait(); err != nil {
			log.Warn("call record not written: a crash during this call would repeat it", "err", err)
		}
	}
	if !final && in.TurnID != "" && t.upID != "" {
		c.saveProgress(in.TurnID, progress{responseID: t.upID, relayed: t.relayed, seq: t.seq})
	}

	if final && c.o.Results != nil && in.TurnID != "" && in.Stored == nil {
		if err := c.o.Results.Put(ctx, in.TurnID, res); err != nil {
			log.Error("storing the LLM result failed; a redelivery would call again", "err", err)
		}
	}
	if res.Error != nil {
		log.Warn("LLM call failed", "status", res.Status, "type", res.Error.Type, "code", res.Error.Code,
			"message", res.Error.Message, "attempts", res.Attempts)
	} else {
		log.Info("LLM call done", "status", res.Status, "attempts", res.Attempts, "ms", res.DurationMs)
	}
	return res, false
}

// done sends the final "done" delta so a live subscriber stops waiting.
func (c *Caller) done(ctx context.Context, in Input, res contracts.LLMResult, seq int, docs *bodies) {
	d := Delta{Type: DeltaDone, Status: "completed", Seq: seq}
	if s, ok := docs.of(res.Body); ok && s.Status != "" {
		d.Status = s.Status
	}
	if res.Cached {
		d.Status = "cached"
	}
	if res.Error != nil {
		d.Status, d.Error = "error", res.Error.Message
	}
	in.Deltas.Delta(context.WithoutCancel(ctx), d)
}

// pooledClient keeps idle connections for as many concurrent calls as a
// backend allows: http.DefaultClient keeps two per host, so at 64 calls in
// flight nearly every call opened (and later closed) its own TCP connection,
// which the benchmark's profile showed as syscall time.
func pooledClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no global cap; the per-host cap below bounds it
	t.MaxIdleConnsPerHost = 1024
	return &http.Client{Transport: t}
}

// client returns the openai-go client of a profile. openai-go's own retries
// are off: this package retries so it can count attempts, honour the
// profile's limits and keep each attempt's body.
func (c *Caller) client(p profiles.Profile) openai.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := p.Name + "\x00" + p.BaseURL
	if cl, ok := c.clients[key]; ok {
		return cl
	}
	// openai-go reads OPENAI_* variables by default. WithAPIKey("") clears a
	// key picked up from OPENAI_API_KEY, and the organization/project headers
	// are dropped, so a profile only ever sends its own credentials.
	opts := []option.RequestOption{option.WithBaseURL(p.BaseURL), option.WithAPIKey(p.APIKey()),
		option.WithHeaderDel("OpenAI-Organization"), option.WithHeaderDel("OpenAI-Project"),
		option.WithMaxRetries(0), option.WithHTTPClient(c.httpClient(p))}
	for k, v := range p.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	if c.o.Hop != "" {
		opts = append(opts, option.WithHeader(contracts.HeaderHop, c.o.Hop))
	}
	cl := openai.NewClient(opts...)
	c.clients[key] = cl
	return cl
}

// httpClient is the client carrying a profile's calls: for a Chat
// Completions backend one whose transport translates each /responses call
// (docs/backends.md), so everything above it runs as for any backend.
// Under both, the profile's MaxResponseBytes caps what the backend's
// answer may be (limit.go): for Chat Completions on the server's own bytes,
// before the translation reads them.
func (c *Caller) httpClient(p profiles.Profile) *http.Client {
	hc := *c.o.HTTPClient
	var rt http.RoundTripper = limitTransport{base: c.o.HTTPClient.Transport, limit: p.MaxResponseBytes}
	if p.ChatCompletions() {
		rt = &chatcompletions.Transport{Base: rt, Chat: p.Chat}
	}
	if p.API == profiles.APIAnthropicMessages {
		rt = &anthropicmessages.Transport{Base: rt, Anthropic: p.Anthropic}
	}
	hc.Transport = rt
	return &hc
}

// acquire takes one of the profile's MaxConcurrent slots, waiting at most as
// long as ctx allows.
func (c *Caller) acquire(ctx context.Context, p profiles.Profile) (release func(), err error) {
	c.mu.Lock()
	sem, ok := c.sems[p.Name]
	if !ok {
		sem = make(chan struct{}, max(p.MaxConcurrent, 1))
		c.sems[p.Name] = sem
	}
	c.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of %d slots of backend %s: %w", cap(sem), p.Name, ctx.Err())
	}
}
