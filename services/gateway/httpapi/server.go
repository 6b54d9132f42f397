// Package httpapi is the gateway's HTTP adapter: OpenAI's Responses API on
// net/http, over the Aptix pipeline. It is a client of the bus like `aptix
// exec` (client.Submit, one shared completion watch per process) and keeps
// nothing in memory another replica would need: response records and
// conversation heads are in JetStream KV, the turns themselves in the stream.
package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/console"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Config configures a gateway. Zero values take the defaults.
type Config struct {
	NC       *nats.Conn
	Profiles *profiles.Set
	// MaxBodyBytes bounds a request body (413 beyond it); default: half the
	// server's max payload, since the turn event carries the request.
	MaxBodyBytes int64
	// SyncTimeout bounds how long a synchronous create waits for its turn
	// (504 beyond it; the turn still completes and GET returns it). Default 10m.
	SyncTimeout time.Duration
	// SubmitTimeout bounds the publish of a turn (503 beyond it). Default 5s.
	SubmitTimeout time.Duration
	// Replicas of the KV bucket (1, or 3 in a cluster).
	Replicas int
	// RetryAfter is the Retry-After of a 503, in seconds. Default 1.
	RetryAfter int
	// RotateCompletions is how often the shared completion watch is
	// replaced, which bounds what it keeps (completions.go). Default 5m.
	RotateCompletions time.Duration
	Logger            *slog.Logger
	// BackgroundTimeout fails a background response still running after it
	// (code timeout). Default DefaultBackgroundTimeout.
	BackgroundTimeout time.Duration
	// Webhooks, when set, delivers the webhooks of terminal responses
	// (webhook.go); nil sends none.
	Webhooks *WebhookConfig
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// CompactionKeys seals the compaction items the gateway makes and
	// opens the ones clients send back (CompactionKeysFromEnv). Default: a
	// random key of this process, whose items no restart or other replica
	// can open.
	CompactionKeys *sealbox.Keyring
	// WSMaxAge is how long a WebSocket lives (then the error
	// websocket_connection_limit_reached and a close). Default 60m.
	WSMaxAge time.Duration
	// WSPingInterval is how often the gateway pings a socket; a socket
	// that does not answer within the interval is closed. Default 30s.
	WSPingInterval time.Duration
	// WSWriteTimeout bounds one frame's write: a reader that takes longer
	// is disconnected (its response still completes). Default 30s.
	WSWriteTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from its headers on
	// (408 beyond it, the connection closed). Default DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Auth says who calls (auth.Chain); nil serves every caller as the
	// anonymous principal "" (APTIX_AUTH=none). Health endpoints are open.
	Auth auth.Authenticator
	// LimitRPM bounds each principal's requests per minute (0: no limit),
	// counted per replica. LimitBackground bounds each principal's
	// background responses queued or running (0: no limit), across replicas.
	LimitRPM        int
	LimitBackground int
	// Stream is the deployment's stream limits (layout.StreamConfigFromEnv):
	// a turn that enters past the queue (entry.go) is admitted at the mark
	// the first stage admits at. Zero values take the defaults.
	Stream layout.StreamConfig
}

// Server is the gateway's http.Handler.
type Server struct {
	cfg    Config
	js     jetstream.JetStream
	store  *Store
	comps  *completions
	stream jetstream.Stream
	// deltas is the stream of stored deltas (resume.go).
	deltas jetstream.Stream
	// cancels holds the turn cancellations (store.CancelBucket).
	cancels *store.Cancels
	hooks   *webhooks
	dl      jetstream.ConsumeContext
	mux     *http.ServeMux
	// hop is this deployment's mark (pipeline.DeploymentMark): a request
	// carrying it comes from this deployment's own LLM caller.
	hop    string
	log    *slog.Logger
	limits *rateLimits
	// usage is the shared accounting: budgets and GET /v1/aptix/usage (usage.go).
	usage *store.Usage
	// console is the web console at /console/ (docs/console.md).
	console *console.Console
	// entrance submits turns at their entry point (entry.go).
	entrance *pipeline.Entrance

	// sockets are the open WebSockets, closed with the server.
	sockMu  sync.Mutex
	sockets map[*socket]struct{}
	closed  bool
}

// New connects the gateway to the bus: the KV bucket, the stream and one
// completion watch shared by every request of this process. The stream
// must exist (the stages create it).
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.NC == nil || cfg.Profiles == nil {
		return nil, errors.New("gateway: NC and Profiles are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = max(cfg.NC.MaxPayload()/2, 64<<10)
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = 10 * time.Minute
	}
	if cfg.SubmitTimeout <= 0 {
		cfg.SubmitTimeout = 5 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 1
	}
	if cfg.RotateCompletions <= 0 {
		cfg.RotateCompletions = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BackgroundTimeout <= 0 {
		cfg.BackgroundTimeout = DefaultBackgroundTimeout
	}
	if cfg.CompactionKeys == nil {
		cfg.CompactionKeys = sealbox.Random()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WSMaxAge <= 0 {
		cfg.WSMaxAge = DefaultWSMaxAge
	}
	if cfg.WSPingInterval <= 0 {
		cfg.WSPingInterval = 30 * time.Second
	}
	if cfg.WSWriteTimeout <= 0 {
		cfg.WSWriteTimeout = 30 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Server{cfg: cfg, js: js, log: cfg.Logger, limits: newRateLimits(cfg.LimitRPM)}
	if s.stream, err = js.Stream(ctx, contracts.StreamName); err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	s.hop = pipeline.MarkOf(s.stream.CachedInfo())
	if s.entrance, err = pipeline.NewEntrance(cfg.NC, cfg.Stream, "gateway"); err != nil {
		return nil, err
	}
	if s.store, err = OpenStore(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if s.deltas, err = ensureDeltaStream(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if s.cancels, err = store.OpenCancels(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if s.usage, err = store.OpenUsage(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	// One ordered consumer for the whole process, not one per request.
	if s.comps, err = newCompletions(ctx, js, cfg.RotateCompletions); err != nil {
		return nil, err
	}
	if s.dl, err = s.startDeadlines(ctx); err != nil {
		return nil, err
	}
	if cfg.Webhooks != nil {
		if s.hooks, err = s.startWebhooks(ctx, *cfg.Webhooks); err != nil {
			return nil, err
		}
	}
	if s.console, err = console.New(console.Config{NC: cfg.NC, Auth: cfg.Auth, Profiles: cfg.Profiles, Logger: cfg.Logger.With("component", "console"),
		Responses: s.lookupResponse}); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// lookupResponse resolves a resp_… id for the console (any owner's: the
// console is for admins).
func (s *Server) lookupResponse(ctx context.Context, id string) (conv, turn string, found bool, err error) {
	meta, err := s.store.Get(ctx, id)
	if err != nil || meta == nil {
		return "", "", false, err
	}
	return meta.ConversationID, meta.TurnID, true, nil
}

// Close stops the completion watch, which ends every request still
// waiting for a completion, and closes the open WebSockets with 1012
// (service restart): a gateway is closed when its process stops, or when
// its NATS connection was lost and a new gateway takes over on a new one.
func (s *Server) Close() {
	s.sockMu.Lock()
	s.closed = true
	socks := s.sockets
	s.sockets = nil
	s.sockMu.Unlock()
	for ws := range socks {
		go ws.close(websocket.StatusServiceRestart, "gateway restarting")
	}
	if s.hooks != nil {
		s.hooks.stop()
	}
	s.dl.Stop()
	s.console.Close()
	s.comps.stop()
	s.cancels.Close()
}

func (s *Server) routes() {
	m := http.NewServeMux()
	// Each route is a server span named by its pattern; the client's
	// traceparent is honoured, so one trace runs from the HTTP request
	// through the publish and every stage.
	handle := func(pattern string, h http.HandlerFunc) {
		m.Handle(pattern, otelhttp.NewHandler(h, pattern))
	}
	handle("POST /v1/responses", s.create)
	// WebSocket mode (websocket.go) on the same path. Not wrapped in a
	// server span: the socket lives up to an hour; each response.create
	// is a turn with its own trace.
	m.HandleFunc("GET /v1/responses", s.websocket)
	handle("POST /v1/chat/completions", s.chatCompletions) // chatcompletions.go
	handle("POST /v1/messages", s.messagesCreate)          // messages.go
	handle("POST /v1/messages/count_tokens", s.messagesCountTokens)
	handle("POST /v1/responses/compact", s.compact)
	handle("POST /v1/responses/input_tokens", s.inputTokens) // inputtokens.go
	handle("GET /v1/responses/{id}", s.get)
	handle("DELETE /v1/responses/{id}", s.delete)
	handle("POST /v1/responses/{id}/cancel", s.cancel)
	handle("GET /v1/responses/{id}/input_items", s.inputItems)
	handle("POST /v1/conversations", s.convCreate)
	handle("GET /v1/conversations/{id}", s.convGet)
	handle("POST /v1/conversations/{id}", s.convUpdate)
	handle("DELETE /v1/conversations/{id}", s.convDelete)
	handle("GET /v1/conversations/{id}/items", s.convItems)
	handle("POST /v1/conversations/{id}/items", s.convAppend)
	handle("GET /v1/conversations/{id}/items/{item_id}", s.convItem)
	handle("DELETE /v1/conversations/{id}/items/{item_id}", s.convItemDelete)
	handle("GET /v1/models", s.models)
	handle("POST /v1/aptix/execute", s.execute)
	handle("GET /v1/aptix/usage", s.usageReport)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /readyz", s.ready)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, &responses.Error{Status: 404, Type: responses.TypeInvalidRequest,
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
	})
	s.mux = m
}

// ServeHTTP serves the API: the health endpoints to anyone, everything
// else to an authenticated caller within its rate (auth.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if contracts.HasMark(r.Header.Get(contracts.HeaderHop), s.hop) {
		// Before authentication: the LLM caller may hold no key for its
		// own gateway, and the answer must say what is wrong.
		code := contracts.CodeLoopDetected
		s.fail(w, &responses.Error{Status: http.StatusLoopDetected, Type: responses.TypeInvalidRequest, Code: &code,
			Message: "This request came from this Aptix deployment's own LLM caller: a backend profile's baseUrl points at this gateway. Point the profile at a model server (docs/backends.md)."})
		return
	}
	r = limitBody(w, r, s.cfg.BodyTimeout) // before authentication (transport.go)
	if console.Owns(r.URL.Path) {
		s.console.ServeHTTP(w, r) // its own sign-in: an admin credential, also from a cookie
		return
	}
	if !open(r.URL.Path) {
		var ok bool
		if r, ok = s.authenticate(w, r); !ok {
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// jsonCodec encodes as encoding/json does, with the v2 engine (the
// pipeline's own codec for turns): about two thirds of the CPU.
var jsonCodec = jsonv1.DefaultOptionsV1()

// writeJSON answers v as JSON, encoded as encoding/json would (jsonCodec).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := jsonv2.Marshal(v, jsonCodec)
	if err != nil {
		http.Error(w, `{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":"encode_failed"}}`, 500)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// fail writes an API error in OpenAI's shape; a 503 carries Retry-After.
func (s *Server) fail(w http.ResponseWriter, e *responses.Error) {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", fmt.Sprint(cmp.Or(e.RetryAfter, s.cfg.RetryAfter)))
	}
	if e.Status >= 500 {
		s.log.Warn("request failed", "status", e.Status, "err", e.Error())
	}
	writeJSON(w, e.Status, e.Body())
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if st := s.cfg.NC.Status(); st != nats.CONNECTED {
		s.fail(w, responses.Unavailable("NATS is "+st.String()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.stream.Info(ctx); err != nil {
		s.fail(w, responses.Unavailable("stream "+contracts.StreamName+" unreachable: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": responses.Models(s.cfg.Profiles)})
}

// submitError classifies a failed publish: a full admission queue or a bus
// that is down is a 503 the client may retry; anything else a 500.
func (s *Server) submitError(err error) *responses.Error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		// The turn event (the request plus what the stages add) is over what
		// NATS carries: the body was too large after all.
		return responses.TooLarge(s.cfg.MaxBodyBytes)
	case backpressure.IsAtCapacity(err):
		return responses.Unavailable("Aptix is at capacity (the turn queue is full); retry later.")
	case errors.Is(err, client.ErrTurnIDReused):
		// The client's mistake, not the server's: the turn id names another
		// request of this conversation, whose answer stands.
		e := responses.BadRequest("turnId", contracts.CodeTurnIDReused, err.Error())
		e.Status = http.StatusConflict
		return e
	case s.cfg.NC.Status() != nats.CONNECTED, errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrConnectionClosed):
		return responses.Unavailable("The Aptix bus is unavailable; retry later.")
	}
	return responses.Internal("submit_failed", err.Error())
}

// turnAt reads the most advanced stored event of a turn: the completed one
// when there is one, else the latest stage reached (for the status of a
// response still running, and for its input items).
//
// A stage whose read fails for another reason than "no message" is skipped
// (the requested events may live in an admission stream of their own); the
// error is returned only when no event could be read at all.
func (s *Server) turnAt(ctx context.Context, conv, turn string) (stage string, t *contracts.Turn, at time.Time, err error) {
	var firstErr error
	for i := len(contracts.Stages) - 1; i >= 0; i-- {
		st := contracts.Stages[i]
		m, err := s.stream.GetLastMsgForSubject(ctx, contracts.Subject(st, conv, turn))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s event of %s: %w", st, turn, err)
			}
			continue
		}
		data, err := claim.EventData(ctx, s.js, m.Header, m.Data)
		if err != nil {
			return "", nil, at, err
		}
		var doc contracts.Turn
		if err := json.Unmarshal(data, &doc); err != nil {
			return "", nil, at, fmt.Errorf("decode %s event of %s: %w", st, turn, err)
		}
		return st, &doc, m.Time, nil
	}
	return "", nil, at, firstErr
}
