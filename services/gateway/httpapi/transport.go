package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// What the gateway asks of a connection, beyond what each endpoint checks
// (docs/security.md, docs/operations.md):
//
//   - headers within HeaderTimeout (http.Server.ReadHeaderTimeout);
//   - a request's body within Config.BodyTimeout of its headers, whoever
//     sends it: the deadline is set before authentication, so a caller
//     without a credential cannot hold a connection by sending its body
//     slowly. It is per request, not http.Server.ReadTimeout: that one would
//     stay on the connection after the body, cancel the request context of
//     a long SSE stream and carry over into a hijacked WebSocket;
//   - an idle keep-alive connection is closed after IdleTimeout;
//   - a body is JSON: Content-Type application/json (parameters such as
//     charset allowed) or none at all; anything else is refused before the
//     body is read, as OpenAI does (400 unsupported_content_type).

// Connection timeouts of HTTPServer.
const (
	HeaderTimeout = 10 * time.Second
	IdleTimeout   = 2 * time.Minute
	// DefaultBodyTimeout is Config.BodyTimeout's default.
	DefaultBodyTimeout = 30 * time.Second
)

// HTTPServer is the http.Server the gateway runs behind (gateway binary and
// `aptix up`): header and idle timeouts, and no whole-request ReadTimeout
// or WriteTimeout, which would cut SSE streams and WebSockets; the body's
// deadline is the handler's (Config.BodyTimeout).
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: HeaderTimeout, IdleTimeout: IdleTimeout}
}

type bodyDeadlineKey struct{}

// limitBody sets the read deadline of r's body to d from now; readBody
// clears it once the body is read, so a response streamed after it is not
// cut. A request without a body (GET, a WebSocket upgrade) gets none.
func limitBody(w http.ResponseWriter, r *http.Request, d time.Duration) *http.Request {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || d <= 0 {
		return r
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), bodyDeadlineKey{}, rc))
}

// bodyRead lifts the deadline limitBody set.
func bodyRead(r *http.Request) {
	if rc, ok := r.Context().Value(bodyDeadlineKey{}).(*http.ResponseController); ok {
		_ = rc.SetReadDeadline(time.Time{})
	}
}

// readBody reads a JSON body of at most MaxBodyBytes: 413 beyond it, 408
// when it does not arrive within BodyTimeout, 400 unsupported_content_type
// when it is not sent as JSON.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *responses.Error) {
	if e := jsonContent(r); e != nil {
		return nil, e
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		// Lifted only for a body read whole: after a failure the server
		// discards what is left of it, within the same deadline.
		bodyRead(r)
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, responses.TooLarge(s.cfg.MaxBodyBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, &responses.Error{Status: http.StatusRequestTimeout, Type: responses.TypeInvalidRequest, Code: ptr("request_timeout"),
			Message: fmt.Sprintf("The request body did not arrive within %s.", s.cfg.BodyTimeout)}
	case err != nil:
		return nil, responses.BadRequest("", "read_failed", "Reading the request body failed: "+err.Error())
	}
	return data, nil
}

// jsonContent refuses a body whose Content-Type is not application/json.
// A missing Content-Type is read as JSON: the body is parsed strictly all
// the same, and minimal clients (a bare http.NewRequest, some scripts) send
// none; the OpenAI SDKs always send application/json.
func jsonContent(r *http.Request) *responses.Error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return responses.UnsupportedContentType(ct)
}

// Live serves the gateway currently connected to the bus (Set), and while
// there is none (the process is still starting, or connecting again after
// NATS closed its connection) answers /healthz 200 and everything else 503
// with Retry-After, so a balancer takes the replica out until it is back.
// The 503 says which of the two it is: a client seeing "re-established"
// during start-up would look for a network fault that never happened.
type Live struct {
	cur atomic.Pointer[Server]
	// served is set by the first gateway Set: from then on a missing one
	// is a lost connection, not a start-up.
	served atomic.Bool
	// BodyTimeout bounds a body sent while there is no gateway; default DefaultBodyTimeout.
	BodyTimeout time.Duration
}

// Set makes s the gateway served (nil: none).
func (l *Live) Set(s *Server) {
	if s != nil {
		l.served.Store(true)
	}
	l.cur.Store(s)
}

func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := l.cur.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	limitBody(w, r, cmpOr(l.BodyTimeout, DefaultBodyTimeout))
	if r.URL.Path == "/healthz" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	w.Header().Set("Retry-After", "1")
	msg := "Aptix is starting; retry shortly."
	if l.served.Load() {
		msg = "The Aptix bus connection is being re-established; retry shortly."
	}
	writeJSON(w, http.StatusServiceUnavailable, responses.Unavailable(msg).Body())
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
