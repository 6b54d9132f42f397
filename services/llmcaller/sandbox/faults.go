package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// fault is a parsed fault spec: a comma-separated list such as
// "latency=200ms,429,retry-after=1", "500", "status=401", "detail=422",
// "malformed", "drop", "stream-error" or "retry-after-ms=50,429".
type fault struct {
	latency      time.Duration
	status       int  // HTTP error status to answer with (0: none)
	detail       bool // error body is {"detail":…} instead of {"error":…}
	malformed    bool
	drop         bool
	streamError  bool // SSE only: an "error" event after response.created
	retryAfter   string
	retryAfterMs string
}

func parseFault(spec string) (fault, error) {
	var f fault
	for _, tok := range strings.Split(spec, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		key, val, _ := strings.Cut(tok, "=")
		switch key {
		case "latency":
			d, err := time.ParseDuration(val)
			if err != nil {
				return f, fmt.Errorf("fault %q: %w", tok, err)
			}
			f.latency = d
		case "malformed":
			f.malformed = true
		case "drop":
			f.drop = true
		case "stream-error":
			f.streamError = true
		case "retry-after":
			f.retryAfter = val
		case "retry-after-ms":
			f.retryAfterMs = val
		case "status", "detail":
			n, err := strconv.Atoi(val)
			if err != nil || n < 400 || n > 599 {
				return f, fmt.Errorf("fault %q: want a 4xx/5xx status", tok)
			}
			f.status, f.detail = n, key == "detail"
		default:
			n, err := strconv.Atoi(key)
			if err != nil || n < 400 || n > 599 || val != "" {
				return f, fmt.Errorf("unknown fault %q (want latency=D, 4xx/5xx, status=N, detail=N, malformed, drop, stream-error, retry-after=S, retry-after-ms=MS)", tok)
			}
			f.status = n
		}
	}
	return f, nil
}

// faultFor picks the fault of request number n: the header wins, then
// FailFirst, then the server-wide Faults. Server-wide Latency always adds.
func (s *Server) faultFor(r *http.Request, n int) (fault, error) {
	spec := r.Header.Get(HeaderFault)
	if spec == "" && n <= s.o.FailFirst {
		spec = s.o.FailFault
		if spec == "" {
			spec = strconv.Itoa(s.o.FailStatus)
		}
	}
	if spec == "" {
		spec = s.o.Faults
	}
	f, err := parseFault(spec)
	f.latency += s.o.Latency
	return f, err
}

// sleep waits d or until the client goes away.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// apply answers the request with its fault and reports whether it did.
func (s *Server) apply(w http.ResponseWriter, f fault) bool {
	switch {
	case f.drop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			writeError(w, http.StatusInternalServerError, "server_error", "", "", "sandbox: connection cannot be hijacked to drop it")
			return true
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return true
	case f.malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"resp_malformed","object":"response","output":[{"type":"message",`))
		return true
	case f.status != 0:
		if f.status == http.StatusTooManyRequests || f.status == http.StatusServiceUnavailable || f.retryAfter != "" || f.retryAfterMs != "" {
			ra := f.retryAfter
			if ra == "" && f.retryAfterMs == "" {
				ra = s.o.RetryAfter
			}
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			if f.retryAfterMs != "" {
				w.Header().Set("retry-after-ms", f.retryAfterMs)
			}
		}
		if f.detail {
			writeJSON(w, f.status, map[string]string{"detail": fmt.Sprintf("sandbox fault: status %d", f.status)})
			return true
		}
		typ, code := errorKind(f.status)
		writeError(w, f.status, typ, "", code, fmt.Sprintf("sandbox fault: status %d", f.status))
		return true
	}
	return false
}

// errorKind maps a status to OpenAI's error type and code.
func errorKind(status int) (typ, code string) {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case status == http.StatusUnauthorized:
		return "authentication_error", "invalid_api_key"
	case status == http.StatusNotFound:
		return "invalid_request_error", "not_found"
	case status >= 500:
		return "server_error", "server_error"
	default:
		return "invalid_request_error", ""
	}
}
