package loadgen

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// counting serves the real sandbox over a real HTTP server and counts the
// POST /v1/responses it answers; every failEvery-th one (0: none) gets a 500.
func counting(t *testing.T, failEvery int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	sb := sandbox.New(sandbox.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = sb.Close() })
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/responses" {
			if i := n.Add(1); failEvery > 0 && i%failEvery == 0 {
				http.Error(w, `{"error":{"message":"injected"}}`, http.StatusInternalServerError)
				return
			}
		}
		sb.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRunCountsWarmupAndTimedRequests(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv, n := counting(t, 0)
		r, err := Run(context.Background(), Options{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "sandbox-1", Input: "hello",
			Concurrency: 3, Warmup: 5, Requests: 40, Stream: stream, ServerPID: os.Getpid()})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Err(); err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if got := n.Load(); got != 45 {
			t.Errorf("stream=%v: the server answered %d requests, want 5 warm-up + 40", stream, got)
		}
		if r.Requests != 40 || r.Concurrency != 3 || r.Stream != stream {
			t.Errorf("stream=%v: result %+v, want 40 requests at concurrency 3", stream, r)
		}
		if !(r.P50 > 0 && r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.Max) {
			t.Errorf("stream=%v: percentiles out of order: %+v", stream, r)
		}
		if r.Max > r.Seconds*1000 || r.PerSecond <= 0 {
			t.Errorf("stream=%v: a request longer than the run, or no rate: %+v", stream, r)
		}
		if r.ServerCPUMs < 0 || r.ClientCPUMs < 0 {
			t.Errorf("stream=%v: negative CPU: %+v", stream, r)
		}
	}
}

func TestRunCountsFailures(t *testing.T) {
	srv, n := counting(t, 4)
	r, err := Run(context.Background(), Options{BaseURL: srv.URL + "/v1", Model: "sandbox-1", Input: "hello", Concurrency: 2, Requests: 20})
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 20 || r.Errors != 5 || r.Requests != 15 {
		t.Fatalf("server saw %d, result %d answered and %d failed; want 20, 15 and 5", n.Load(), r.Requests, r.Errors)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "5 of 20") {
		t.Errorf("Err() = %v, want 5 of 20 failed", err)
	}
	// A failing warm-up is an error: the timed figures would be of a broken server.
	if _, err := Run(context.Background(), Options{BaseURL: srv.URL + "/v1", Model: "sandbox-1", Input: "x", Concurrency: 1, Warmup: 4, Requests: 1}); err == nil {
		t.Error("a warm-up with failures passed")
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a ')' of its own; utime 250, stime 31.
	line := "4242 (aptix (x) up) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 31 0 0 20 0 12 0 99 123456 789 18446744073709551615"
	d, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if d != 281*10*time.Millisecond {
		t.Errorf("parseStat = %v, want 2.81s", d)
	}
	if _, err := parseStat("4242 (short) S 1 2"); err == nil {
		t.Error("a short stat line parsed")
	}
	self, err := SelfCPU()
	if err != nil || self < 0 {
		t.Errorf("SelfCPU = %v, %v", self, err)
	}
}
