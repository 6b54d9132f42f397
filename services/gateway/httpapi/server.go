// Package httpapi is the gateway's HTTP front door: OpenAI's Responses
// API over HTTP and WebSocket, Chat Completions, Anthropic's Messages and
// the execute endpoint, on net/http. Each handler decodes a request,
// calls the gateway application (services/gateway/application) with the
// authenticated principal and encodes what it answers, errors in the
// door's own shape; the turns, the stores and the streams are the
// application's. The console is served beside them (its own sign-in).
package httpapi

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/console"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Config configures a gateway: the application's settings (embedded) and
// the HTTP door's own. Zero values take the defaults.
type Config struct {
	application.Config
	// RetryAfter is the Retry-After of a 503, in seconds. Default 1.
	RetryAfter int
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
	// counted per replica.
	LimitRPM int
}

// Server is the gateway's http.Handler: the front doors over one
// application.
type Server struct {
	cfg Config
	app *application.App
	mux *http.ServeMux
	log *slog.Logger
	// limits is the per-principal request rate (auth.go).
	limits *rateLimits
	// console is the web console at /console/ (docs/console.md).
	console *console.Console

	// sockets are the open WebSockets, closed with the server.
	sockMu  sync.Mutex
	sockets map[*socket]struct{}
	closed  bool
}

// New serves the application a over HTTP. The server owns a from then on:
// Close closes it too. cfg.Config is the application's (a.Config is used,
// with its defaults filled).
func New(a *application.App, cfg Config) (*Server, error) {
	cfg.Config = a.Config()
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 1
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
	s := &Server{cfg: cfg, app: a, log: cfg.Logger, limits: newRateLimits(cfg.LimitRPM)}
	var err error
	if s.console, err = console.New(console.Config{NC: cfg.NC, Auth: cfg.Auth, Profiles: cfg.Profiles, Logger: cfg.Logger.With("component", "console"),
		Responses: a.LookupResponse}); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Close closes the open WebSockets with 1012 (service restart), the
// console and the application (which ends every request still waiting
// for a completion): a gateway is closed when its process stops, or when
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
	s.console.Close()
	s.app.Close()
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
	if contracts.HasMark(r.Header.Get(contracts.HeaderHop), s.app.Mark()) {
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
	if e := s.app.Ready(r.Context()); e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": responses.Models(s.cfg.Profiles)})
}

func ptr(s string) *string { return &s }
