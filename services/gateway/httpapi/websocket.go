package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// DefaultWSMaxAge is the connection limit of WebSocket mode (OpenAI's and
// Open Responses': 60 minutes).
const DefaultWSMaxAge = 60 * time.Minute

// websocket is GET /v1/responses with an Upgrade: WebSocket mode, a second
// adapter over the same domain as POST /v1/responses. Each response.create
// message is a create (prepareFrom, Submit, relay, exactly as the SSE path),
// its events go out as one JSON text frame each. What the socket adds:
//
//   - one response in flight: a response.create while one runs gets an
//     error event (response_in_progress), never an interleaved stream;
//   - the socket's last response in memory (meta, upstream continuation id,
//     head revision, call ids): the next response.create that continues it
//     reads nothing from KV or the stream, and moves the head with one
//     compare-and-set. It is also what makes store:false continuation work
//     on the socket; a reconnect loses it (previous_response_not_found for
//     a store:false id), while stored responses continue from JetStream on
//     any replica;
//   - a failed continuation evicts the id it continued from that cache;
//   - the connection limit (Config.WSMaxAge), pings, and a write deadline
//     per frame (a slow reader is disconnected, never buffered for).
//
// A socket that drops does not cancel its response: the turn completes and,
// with store:true, GET returns it.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.fail(w, &responses.Error{Status: http.StatusMethodNotAllowed, Type: responses.TypeInvalidRequest,
			Message: "GET /v1/responses is WebSocket mode (send Upgrade: websocket); create a response with POST /v1/responses."})
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Any origin: the API has no cookies, and the non-browser clients
		// that use it send none. (Auth, when the gateway has it, is the
		// handler chain's, before the upgrade.)
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept wrote the HTTP error
	}
	c.SetReadLimit(s.cfg.MaxBodyBytes)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	ws := &socket{s: s, c: c, ctx: ctx, cancel: cancel,
		cred: r.Clone(context.WithoutCancel(r.Context())), owner: auth.From(r.Context()).ID}
	defer ws.close(websocket.StatusNormalClosure, "")
	if !s.track(ws) {
		ws.close(websocket.StatusServiceRestart, "gateway restarting")
		return
	}
	defer s.untrack(ws)
	go ws.keepAlive()
	limit := time.AfterFunc(s.cfg.WSMaxAge, ws.expire)
	defer limit.Stop()
	ws.read()
}

// track registers an open socket for Close; false once the server closed.
func (s *Server) track(ws *socket) bool {
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	if s.closed {
		return false
	}
	if s.sockets == nil {
		s.sockets = map[*socket]struct{}{}
	}
	s.sockets[ws] = struct{}{}
	return true
}

func (s *Server) untrack(ws *socket) {
	s.sockMu.Lock()
	delete(s.sockets, ws)
	s.sockMu.Unlock()
}

// socket is one WebSocket connection.
type socket struct {
	s      *Server
	c      *websocket.Conn
	ctx    context.Context // done when the socket is closed
	cancel context.CancelFunc

	// flight guards busy (a response is in flight). A response's last
	// frame is written and busy cleared under it, so a response.create sent
	// as soon as that frame arrives is never refused, and one sent before
	// is refused or waits: streams never interleave.
	flight  sync.Mutex
	busy    bool
	gen     uint64      // numbers the socket's responses: end frees only its own
	expired atomic.Bool // past the connection limit
	revoked atomic.Bool // its credential failed a check: closing
	ended   sync.Once

	mu   sync.Mutex
	last *application.Prior // the socket's previous response (connection-local cache)
	// warm is the socket's last generate:false response, which the next
	// response.create may continue (responses.ContinueWarmup).
	warm *responses.Warmup

	// cred is the upgrade request, whose credential authorized checks
	// again; owner is the principal it was.
	cred   *http.Request
	owner  string
	authMu sync.Mutex
}

// authorized checks the socket's credential again for each response.create,
// as HTTP checks it for each request (one KV read for a key): a key revoked
// or expired (or a token past its exp) since the upgrade refuses the
// response.create at once, and end says the socket must close (1008). A
// trust window between checks (it was 5 s) let a revoked key run one more
// paid turn. A key store that cannot be read refuses this create only (503).
func (ws *socket) authorized() (e *responses.Error, end bool) {
	s := ws.s
	if s.cfg.Auth == nil {
		return nil, false
	}
	ws.authMu.Lock()
	defer ws.authMu.Unlock()
	ctx, cancel := context.WithTimeout(ws.ctx, 10*time.Second)
	defer cancel()
	p, f := s.cfg.Auth.Authenticate(ws.cred.WithContext(ctx))
	switch {
	case f == nil && p.ID == ws.owner:
		return nil, false
	case f != nil && f.Code == "unavailable":
		return responses.Unavailable("The key store is unavailable; retry later."), false
	}
	code, reason := auth.CodeInvalidKey, "principal changed"
	if f != nil {
		code, reason = f.Code, f.Reason
	}
	s.log.Info("websocket closed: its credential is no longer valid", "remote", ws.cred.RemoteAddr, "reason", reason)
	return &responses.Error{Status: http.StatusUnauthorized, Type: responses.TypeInvalidRequest, Code: ptr(code),
		Message: "The credential this WebSocket was opened with is no longer valid (revoked or expired). Connect again with a valid one."}, true
}

// read is the read loop: it answers every message at once, so a second
// response.create is refused while the first runs, and the library sees
// pongs and the close handshake.
func (ws *socket) read() {
	for {
		typ, data, err := ws.c.Read(ws.ctx)
		if err != nil {
			return
		}
		if ws.revoked.Load() {
			continue // the close frame is on its way
		}
		if ws.expired.Load() {
			// The socket closes once its running response has ended.
			ws.sendError(responses.ConnectionLimit(ws.s.cfg.WSMaxAge.String()))
			continue
		}
		if typ != websocket.MessageText {
			ws.sendError(responses.BadRequest("", responses.CodeInvalidType, "WebSocket messages are JSON text frames."))
			continue
		}
		gen, ok := ws.begin()
		if !ok {
			ws.sendError(responses.ResponseInProgress())
			continue
		}
		go func() {
			ws.create(gen, data)
			ws.end(gen, nil) // when the socket went away before a last frame
		}()
	}
}

// begin marks the socket busy with a new response; false when it already is.
func (ws *socket) begin() (uint64, bool) {
	ws.flight.Lock()
	defer ws.flight.Unlock()
	if ws.busy {
		return 0, false
	}
	ws.busy = true
	ws.gen++
	return ws.gen, true
}

// end writes a response's last frames (its terminal event, or the error
// event that refused it) and frees the socket, in one step; past the
// connection limit the socket then ends.
func (ws *socket) end(gen uint64, last []responses.Event) bool {
	ws.flight.Lock()
	if !ws.busy || ws.gen != gen {
		ws.flight.Unlock()
		return true // already ended
	}
	ok := true
	if len(last) > 0 {
		ok = ws.emit(last)
	}
	ws.busy = false
	expired := ws.expired.Load()
	if expired {
		ws.busy = true // nothing starts on a socket about to close
		ws.gen++
	}
	ws.flight.Unlock()
	if expired {
		ws.limitReached()
	}
	return ok
}

// expire runs at the connection limit: an idle socket ends now, a busy one
// after its response's terminal event.
func (ws *socket) expire() {
	ws.expired.Store(true)
	ws.flight.Lock()
	idle := !ws.busy
	if idle {
		ws.busy = true // nothing starts on a socket about to close
		ws.gen++
	}
	ws.flight.Unlock()
	if idle {
		ws.limitReached()
	}
}

func (ws *socket) limitReached() {
	ws.ended.Do(func() {
		ws.sendError(responses.ConnectionLimit(ws.s.cfg.WSMaxAge.String()))
		ws.close(websocket.StatusNormalClosure, responses.CodeConnectionLimit)
	})
}

// close ends the socket with a close frame, then its context. Cancelling
// first ended the read loop's Read, which closes the connection at once:
// the close frame then raced the TCP close, and a client sometimes read EOF
// instead of the close code (TestWebSocketConnectionLimit, about 1 run in 100).
func (ws *socket) close(code websocket.StatusCode, reason string) {
	_ = ws.c.Close(code, reason)
	ws.cancel()
}

// keepAlive pings the client every interval; no pong within the interval
// closes the socket (a half-open TCP connection is found within two).
func (ws *socket) keepAlive() {
	t := time.NewTicker(ws.s.cfg.WSPingInterval)
	defer t.Stop()
	for {
		select {
		case <-ws.ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ws.ctx, ws.s.cfg.WSPingInterval)
			err := ws.c.Ping(pctx)
			cancel()
			if err != nil {
				ws.cancel()
				_ = ws.c.CloseNow()
				return
			}
		}
	}
}

// emit writes events, one text frame each. A frame that cannot be written
// within WSWriteTimeout (a reader that does not keep up) ends the socket:
// the buffering between the turn and the client is the deltas channel and
// the TCP buffers, never an unbounded queue.
func (ws *socket) emit(evs []responses.Event) bool {
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			return false
		}
		wctx, cancel := context.WithTimeout(ws.ctx, ws.s.cfg.WSWriteTimeout)
		err = ws.c.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			ws.cancel()
			_ = ws.c.CloseNow()
			return false
		}
	}
	return true
}

func (ws *socket) sendError(e *responses.Error) {
	if e.Status >= 500 {
		ws.s.log.Warn("websocket response.create failed", "status", e.Status, "err", e.Error())
	}
	ws.emit([]responses.Event{responses.ErrorEvent(e)})
}

// cached is the socket's previous response when it is id.
func (ws *socket) cached(id string) *application.Prior {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if id == "" || ws.last == nil || ws.last.ID() != id {
		return nil
	}
	return ws.last
}

// evict drops id from the cache (a continuation of it failed).
func (ws *socket) evict(id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if id != "" && ws.last != nil && ws.last.ID() == id {
		ws.last = nil
	}
}

func (ws *socket) remember(p *application.Prior) {
	ws.mu.Lock()
	ws.last = p
	ws.mu.Unlock()
}

// create runs one response.create: the same steps as a streamed POST
// /v1/responses, with the socket's cache as the prior.
func (ws *socket) create(gen uint64, data []byte) {
	s := ws.s
	ws.mu.Lock()
	warm := ws.warm
	ws.mu.Unlock()
	data, e := responses.ContinueWarmup(data, warm)
	var req *responses.CreateRequest
	var prevID string
	if e == nil {
		req, prevID, e = responses.ParseSocketCreate(data)
	}
	fail := func(e *responses.Error) {
		ws.evict(prevID)
		if e.Status >= 500 {
			s.log.Warn("websocket response.create failed", "status", e.Status, "err", e.Error())
		}
		ws.end(gen, []responses.Event{responses.ErrorEvent(e)})
	}
	if e != nil {
		fail(e)
		return
	}
	if e, end := ws.authorized(); e != nil {
		if !end {
			fail(e)
			return
		}
		ws.revoked.Store(true) // nothing more starts on this socket
		ws.evict(prevID)
		ws.end(gen, []responses.Event{responses.ErrorEvent(e)})
		ws.close(websocket.StatusPolicyViolation, "credential revoked or expired")
		return
	}
	if req.WarmupOnly() {
		ws.warmup(gen, req)
		return
	}
	known := ws.cached(req.PreviousID)
	if known != nil {
		if e := responses.CheckCallOutputs(req.Input, known.CallIDs()); e != nil {
			fail(e)
			return
		}
	}
	// The turn runs on a context detached from the socket: a socket that
	// goes away does not cancel it.
	ctx := context.WithoutCancel(ws.ctx)
	run, e := s.app.Start(ctx, auth.From(ctx), application.Turn{Request: req, Follow: true, Prior: known})
	if e != nil {
		fail(e)
		return
	}
	defer run.Close()
	// The cache is updated before the terminal frame goes out, so the
	// client's next response.create finds it; the conversation object (if
	// any) is settled before it too, so that create sees this one's output.
	onFinal := func(final *responses.Response, t *contracts.Turn) {
		if t != nil && responses.Failure(t) == nil && (final.Status == responses.StatusCompleted || final.Status == responses.StatusIncomplete) {
			ws.remember(run.Prior(t, responses.CallIDs(final.Output)))
		} else {
			ws.evict(req.PreviousID)
		}
	}
	s.app.Relay(ws.ctx, run, onFinal, func(evs []responses.Event) bool {
		if n := len(evs); n > 0 && responses.Terminal(strings.TrimPrefix(evs[n-1].Type, "response.")) {
			return ws.end(gen, evs)
		}
		return ws.emit(evs)
	})
}

// warmup answers a generate:false response.create: a completed response
// with no output and zero usage, no model call, nothing stored. The socket
// keeps its input, so the response.create that continues it runs the turn
// it prepared.
func (ws *socket) warmup(gen uint64, req *responses.CreateRequest) {
	s := ws.s
	_, model, e := responses.Resolve(s.cfg.Profiles, req.Model)
	if e == nil && req.PreviousID != "" && ws.cached(req.PreviousID) == nil {
		// A warm-up continuing a response must name one the turn can continue.
		if _, re := s.app.Record(ws.ctx, auth.From(ws.ctx), req.PreviousID); re != nil {
			e = responses.PreviousNotFound(req.PreviousID)
		}
	}
	var meta responses.Meta
	if e == nil {
		meta, e = responses.MetaFor(req)
	}
	if e != nil {
		ws.end(gen, []responses.Event{responses.ErrorEvent(e)})
		return
	}
	meta.ID = application.NewResponseID()
	meta.CreatedAt, meta.Owner = s.cfg.Now().Unix(), ws.owner
	if meta.Model == "" {
		meta.Model = model
	}
	ws.mu.Lock()
	ws.warm = &responses.Warmup{ID: meta.ID, Input: req.Input, PreviousID: req.PreviousID}
	ws.mu.Unlock()
	ws.end(gen, responses.WarmupEvents(meta, s.cfg.Now().Unix()))
}

// WebSocketConfigFromEnv sets cfg's connection settings from
// APTIX_WS_MAX_AGE (the connection limit, default 60m),
// APTIX_WS_PING_INTERVAL (30s), APTIX_WS_WRITE_TIMEOUT (30s),
// APTIX_HTTP_BODY_TIMEOUT (reading a request body, 30s), Go durations;
// unset keeps cfg's values.
func WebSocketConfigFromEnv(cfg *Config) error {
	for _, v := range []struct {
		env string
		dst *time.Duration
	}{{"APTIX_WS_MAX_AGE", &cfg.WSMaxAge}, {"APTIX_WS_PING_INTERVAL", &cfg.WSPingInterval}, {"APTIX_WS_WRITE_TIMEOUT", &cfg.WSWriteTimeout},
		{"APTIX_HTTP_BODY_TIMEOUT", &cfg.BodyTimeout}} {
		s := os.Getenv(v.env)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s %q: want a positive duration such as 60m", v.env, s)
		}
		*v.dst = d
	}
	return nil
}
