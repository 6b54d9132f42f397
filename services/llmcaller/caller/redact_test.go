package caller_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// echoKey is the profile's API key in the tests below; echoHeader a
// secret header it sends too.
const (
	echoKey    = "sk-echo-0123456789abcdefghij"
	echoHeader = "hdr-secret-98765"
)

// echoServer answers as a backend that echoes the request's credentials in
// its errors: by mode, a 401 with an OpenAI error object, a 500 in plain
// text (retried), or a 200 event stream whose error event carries them.
func echoServer(t *testing.T, mode string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	calls := &atomic.Int32{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		auth, hdr := r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")
		switch mode {
		case "401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Invalid Authorization header: %s (x-api-key %s)","type":"invalid_request_error","code":"invalid_api_key"}}`, auth, hdr)
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "proxy error: request headers were Authorization: %s; X-Api-Key: %s", auth, hdr)
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_e","status":"in_progress","output":[]}}`+"\n\n")
			fmt.Fprintf(w, `data: {"type":"error","sequence_number":1,"code":"bad_auth","message":"rejected %s"}`+"\n\n", auth)
		}
	}))
	t.Cleanup(ts.Close)
	return ts, calls
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUpstreamErrorsRedacted: a backend that echoes the
// profile's key (and a secret header) in its error never gets them past the
// caller: not in the result's message or body (what the client, the events
// and the console get), not in a log line (each retry's and the failure's),
// not in the stream's final delta, not in the span.
func TestUpstreamErrorsRedacted(t *testing.T) {
	t.Setenv("APTIX_TEST_ECHO_KEY", echoKey)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	for _, mode := range []string{"401", "500", "stream"} {
		t.Run(mode, func(t *testing.T) {
			ts, calls := echoServer(t, mode)
			set := profileSet(ts.URL, func(p *profiles.Profile) {
				p.APIKeyEnv, p.Headers, p.MaxRetries = "APTIX_TEST_ECHO_KEY", map[string]string{"X-Api-Key": echoHeader}, 1
			})
			var logs syncBuffer
			c := caller.New(set, caller.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), BaseBackoff: 1, MaxBackoff: 1})
			rec := &recorder{}
			res := c.Call(context.Background(), caller.Input{TurnID: "echo-" + mode, Body: simpleBody(t, "x"), Stream: mode == "stream", Deltas: rec})
			if res.Error == nil {
				t.Fatalf("no error: %+v", res)
			}
			if mode == "500" && calls.Load() != 2 {
				t.Fatalf("%d calls: the 500 should have been retried once (its log line checked too)", calls.Load())
			}
			var deltas strings.Builder
			for _, d := range rec.all() {
				deltas.WriteString(d.Error + d.Text)
			}
			var spanText strings.Builder
			for _, s := range spans.Ended() {
				spanText.WriteString(s.Status().Description)
				for _, kv := range s.Attributes() {
					spanText.WriteString(kv.Value.Emit())
				}
			}
			for sink, text := range map[string]string{"message": res.Error.Message, "code": res.Error.Code, "body": res.Body,
				"log": logs.String(), "deltas": deltas.String(), "span": spanText.String()} {
				for _, secret := range []string{echoKey, echoHeader, "0123456789abcdefghij"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds a credential: %s", sink, text)
					}
				}
			}
			if !strings.Contains(res.Error.Message+res.Body, "[REDACTED]") {
				t.Errorf("the message lost its sense: %q / %q", res.Error.Message, res.Body)
			}
		})
	}
}
