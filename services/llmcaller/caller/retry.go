package caller

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retryableStatus is the set openai-go itself retries: request timeout,
// conflict, rate limit and server errors. Every other 4xx is final: sending
// the same body again cannot succeed and may cost money. So is 508 Loop
// Detected: a profile pointing at its own gateway stays one.
func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500 && status != http.StatusLoopDetected
}

// retryAfter reads the server's requested wait: retry-after-ms (OpenAI's
// millisecond header) first, then Retry-After as seconds or an HTTP-date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before retry number n (1-based) when the server named
// none: exponential from base, capped, with up to 25% jitter taken off so
// replicas retrying together spread out.
func backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d - time.Duration(rand.Float64()*0.25*float64(d))
}
