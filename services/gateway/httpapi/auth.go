package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/messages"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// open reports whether path is served without credentials (health only).
func open(path string) bool { return path == "/healthz" || path == "/readyz" }

// authenticate is the middleware: it resolves the caller (Config.Auth; nil
// lets every caller in as the anonymous principal ""), refuses a missing
// or bad credential with 401 in OpenAI's shape, and applies the per-principal
// request rate. What failed is logged (never the credential); the client
// learns only that its key or token was refused.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	p := auth.Principal{Via: "none"}
	if s.cfg.Auth != nil {
		var f *auth.Failure
		p, f = s.cfg.Auth.Authenticate(r)
		if f != nil {
			if f.Code == "unavailable" {
				if isMessagesPath(r.URL.Path) {
					s.failMessages(w, responses.Unavailable("The key store is unavailable; retry later."))
					return nil, false
				}
				s.fail(w, responses.Unavailable("The key store is unavailable; retry later."))
				return nil, false
			}
			s.log.Info("request refused: authentication failed", "method", r.Method, "path", r.URL.Path,
				"remote", r.RemoteAddr, "reason", f.Reason)
			challenge := `Bearer realm="aptix"`
			msg := "Incorrect API key provided."
			if f.Code == auth.CodeInvalidToken {
				msg = "Invalid token."
			}
			if f.Missing {
				msg = "You didn't provide an API key (Authorization: Bearer …, or X-API-Key)."
			} else {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			if isMessagesPath(r.URL.Path) {
				writeJSON(w, http.StatusUnauthorized, messages.ErrorDoc("authentication_error", msg))
				return nil, false
			}
			writeJSON(w, http.StatusUnauthorized, (&responses.Error{Status: 401, Type: responses.TypeInvalidRequest,
				Code: ptr(f.Code), Message: msg}).Body())
			return nil, false
		}
	}
	if wait := s.limits.allow(p.ID, s.cfg.Now()); wait > 0 && isMessagesPath(r.URL.Path) {
		s.failMessages(w, &responses.Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("Rate limit reached: %d requests per minute.", s.cfg.LimitRPM),
			RetryAfter: max(1, int(math.Ceil(wait.Seconds())))})
		return nil, false
	} else if wait > 0 {
		s.tooMany(w, wait, fmt.Sprintf("Rate limit reached: %d requests per minute. Retry after %s.", s.cfg.LimitRPM, wait.Round(time.Second)))
		return nil, false
	}
	return r.WithContext(auth.With(r.Context(), p)), true
}

// tooMany writes a 429 in OpenAI's shape with Retry-After (whole seconds, at least 1).
func (s *Server) tooMany(w http.ResponseWriter, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", fmt.Sprint(max(1, int(math.Ceil(wait.Seconds())))))
	writeJSON(w, http.StatusTooManyRequests, (&responses.Error{Status: 429, Type: "requests",
		Code: ptr("rate_limit_exceeded"), Message: msg}).Body())
}

// rateLimits is the per-principal request rate (APTIX_LIMIT_RPM): a token
// bucket per principal, in this process. Each replica counts its own
// requests, so behind a balancer over n replicas a principal gets up to n×
// the rate.
type rateLimits struct {
	rpm   int
	mu    sync.Mutex
	byKey map[string]*limiter
}

type limiter struct {
	l    *rate.Limiter
	seen time.Time
}

func newRateLimits(rpm int) *rateLimits {
	return &rateLimits{rpm: rpm, byKey: map[string]*limiter{}}
}

// allow takes a request from p's bucket; it returns 0, or how long to wait.
func (rl *rateLimits) allow(p string, now time.Time) time.Duration {
	if rl == nil || rl.rpm <= 0 {
		return 0
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	l := rl.byKey[p]
	if l == nil {
		if len(rl.byKey) > 10000 { // forget idle principals (a full bucket is the same as a new one)
			for k, v := range rl.byKey {
				if now.Sub(v.seen) > time.Minute {
					delete(rl.byKey, k)
				}
			}
		}
		l = &limiter{l: rate.NewLimiter(rate.Limit(float64(rl.rpm)/60), rl.rpm)}
		rl.byKey[p] = l
	}
	l.seen = now
	res := l.l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}
