package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLiveWithoutGateway: while no gateway is connected (the process is
// connecting to NATS again), health answers and everything else is a 503
// a client retries, in OpenAI's shape.
func TestLiveWithoutGateway(t *testing.T) {
	l := &Live{}
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/healthz", 200}, {"GET", "/readyz", 503}, {"POST", "/v1/responses", 503}, {"GET", "/v1/responses/resp_1", 503}} {
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(`{}`)))
		if rec.Code != c.status {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.status)
		}
		if c.status == 503 && (rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"code":"service_unavailable"`)) {
			t.Fatalf("%s %s: %v %s", c.method, c.path, rec.Header(), rec.Body)
		}
	}
}

// TestLiveStartingMessage: before the first gateway is set the 503 says
// Aptix is starting; only after one was served and lost does it speak of
// the bus connection being re-established.
func TestLiveStartingMessage(t *testing.T) {
	l := &Live{}
	get := func() string {
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
		return rec.Body.String()
	}
	if b := get(); !strings.Contains(b, "starting") || strings.Contains(b, "re-established") {
		t.Fatalf("before start: %s", b)
	}
	l.Set(&Server{})
	l.Set(nil)
	if b := get(); !strings.Contains(b, "re-established") {
		t.Fatalf("after a lost connection: %s", b)
	}
}

// TestJSONContent: application/json with or without parameters, or no
// Content-Type, is JSON; anything else is refused.
func TestJSONContent(t *testing.T) {
	for ct, ok := range map[string]bool{"": true, "application/json": true, "application/json; charset=utf-8": true, "APPLICATION/JSON": true,
		"text/plain": false, "text/plain; charset=utf-8": false, "application/x-www-form-urlencoded": false, "application/json-seq": false, "application/json;": true, ";": false} {
		r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader("{}"))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		if e := jsonContent(r); (e == nil) != ok {
			t.Errorf("%q: %v", ct, e)
		}
	}
}
