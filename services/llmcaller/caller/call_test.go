package caller_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

func TestCallSucceedsAgainstSandbox(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{ConversationID: "c1", TurnID: "t1", Body: simpleBody(t, "Say hi")})
	if res.Error != nil || res.Status != 200 || res.Attempts != 1 || res.Backend != "sb" || res.Model != "sandbox-1" || res.Cached {
		t.Fatalf("result %+v", res)
	}
	if got, want := outputText(t, res.Body), "Sandbox reply (mode TEST) to: Say hi. Context chunks: none."; got != want {
		t.Fatalf("text %q want %q", got, want)
	}
	if strings.Contains(string(srv.LastRequest()), `"stream"`) {
		t.Fatalf("a non-streaming call must not send stream: %s", srv.LastRequest())
	}
}

func TestRawBodyKeptVerbatim(t *testing.T) {
	const body = "{ \"id\" : \"resp_x\",\n  \"output\":[] ,\"status\":\"completed\", \"extra\": 1.50 }\n"
	ts, _ := fixedServer(t, 200, map[string]string{"Content-Type": "application/json"}, body)
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
	if res.Body != body || res.Error != nil {
		t.Fatalf("body %q error %+v", res.Body, res.Error)
	}
}

func TestErrorsAreData(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantType   string
		wantCode   string
		wantMsg    string
		wantStatus int
	}{
		{"openai shape", 400, `{"error":{"message":"Invalid 'input'.","type":"invalid_request_error","param":"input","code":"invalid_type"}}`,
			"invalid_request_error", "invalid_type", "Invalid 'input'.", 400},
		{"detail string", 422, `{"detail":"model not loaded"}`, "detail", "", "model not loaded", 422},
		{"detail array", 422, `{"detail":[{"loc":["body","input"],"msg":"field required"}]}`, "detail", "", `[{"loc":["body","input"],"msg":"field required"}]`, 422},
		{"numeric code", 404, `{"error":{"message":"no such model","type":"not_found","code":404}}`, "not_found", "404", "no such model", 404},
		{"plain text", 403, "forbidden by proxy", "", "", "upstream returned HTTP 403: forbidden by proxy", 403},
		{"malformed 200", 200, `{"id":"resp_1","output":[`, "malformed_response", "", "not valid JSON", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, count := fixedServer(t, tt.status, map[string]string{"Content-Type": "application/json"}, tt.body)
			c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, BaseBackoff: time.Millisecond})
			res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
			if res.Error == nil {
				t.Fatalf("want an error, got %+v", res)
			}
			e := res.Error
			if res.Status != tt.wantStatus || res.Body != tt.body || e.Type != tt.wantType || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("result %+v error %+v", res, e)
			}
			if res.Attempts != 1 || count.Load() != 1 {
				t.Fatalf("a non-retryable failure was retried: attempts %d, requests %d", res.Attempts, count.Load())
			}
		})
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		faults       []string
		maxRetries   int
		wantAttempts int
		wantStatus   int
		wantType     string
		minWait      time.Duration
		maxWait      time.Duration
	}{
		{"500 then ok", []string{"500"}, 3, 2, 200, "", 0, time.Second},
		{"429 Retry-After seconds", []string{"429,retry-after=1"}, 3, 2, 200, "", time.Second, 2500 * time.Millisecond},
		{"429 retry-after-ms beats backoff", []string{"429,retry-after-ms=300"}, 3, 2, 200, "", 300 * time.Millisecond, 1500 * time.Millisecond},
		{"408 and 409 retried", []string{"status=408", "status=409"}, 3, 3, 200, "", 0, time.Second},
		{"dropped connection then ok", []string{"drop"}, 3, 2, 200, "", 0, time.Second},
		{"exhausted", []string{"502", "503,retry-after=0", "500"}, 2, 3, 500, "server_error", 0, time.Second},
		{"dropped every time", []string{"drop", "drop"}, 1, 2, 0, "connection_error", 0, time.Second},
		{"400 not retried", []string{"status=400"}, 3, 1, 400, "invalid_request_error", 0, 500 * time.Millisecond},
		{"401 not retried", []string{"status=401"}, 3, 1, 401, "authentication_error", 0, 500 * time.Millisecond},
		{"404 not retried", []string{"status=404"}, 3, 1, 404, "invalid_request_error", 0, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, srv := startSandbox(t, sandbox.Options{})
			set := profileSet(ts.URL, func(p *profiles.Profile) { p.MaxRetries = tt.maxRetries })
			// A 3s computed backoff proves a faster retry came from the header.
			base := 3 * time.Second
			if tt.minWait == 0 {
				base = 10 * time.Millisecond
			}
			c := caller.New(set, caller.Options{Logger: quiet, HTTPClient: faultSequence(tt.faults...), BaseBackoff: base})
			began := time.Now()
			res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
			took := time.Since(began)
			if res.Attempts != tt.wantAttempts || srv.Requests() != tt.wantAttempts || res.Status != tt.wantStatus {
				t.Fatalf("attempts %d requests %d status %d, want %d/%d (error %+v)", res.Attempts, srv.Requests(), res.Status, tt.wantAttempts, tt.wantStatus, res.Error)
			}
			if (tt.wantType == "") != (res.Error == nil) || (res.Error != nil && res.Error.Type != tt.wantType) {
				t.Fatalf("error %+v, want type %q", res.Error, tt.wantType)
			}
			if took < tt.minWait || took > tt.maxWait {
				t.Fatalf("took %s, want between %s and %s", took, tt.minWait, tt.maxWait)
			}
		})
	}
}

func TestRetryAfterBeyondTurnDeadlineIsNotWaited(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.TurnTimeout = time.Second })
	c := caller.New(set, caller.Options{Logger: quiet, HTTPClient: faultSequence("429,retry-after=30")})
	began := time.Now()
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
	if time.Since(began) > 500*time.Millisecond || res.Status != 429 || res.Attempts != 1 || srv.Requests() != 1 ||
		!strings.Contains(res.Error.Message, "turn deadline") || res.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("took %s, result %+v error %+v", time.Since(began), res, res.Error)
	}
}

func TestTimeouts(t *testing.T) {
	t.Run("attempt timeout is retried", func(t *testing.T) {
		ts, srv := startSandbox(t, sandbox.Options{})
		set := profileSet(ts.URL, func(p *profiles.Profile) { p.AttemptTimeout = 150 * time.Millisecond })
		c := caller.New(set, caller.Options{Logger: quiet, HTTPClient: faultSequence("latency=2s"), BaseBackoff: time.Millisecond})
		began := time.Now()
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
		if res.Error != nil || res.Attempts != 2 || srv.Requests() != 2 || time.Since(began) > time.Second {
			t.Fatalf("took %s result %+v error %+v", time.Since(began), res, res.Error)
		}
	})
	t.Run("attempt timeout exhausted", func(t *testing.T) {
		ts, _ := startSandbox(t, sandbox.Options{Latency: 2 * time.Second})
		set := profileSet(ts.URL, func(p *profiles.Profile) { p.AttemptTimeout = 100 * time.Millisecond; p.MaxRetries = 1 })
		c := caller.New(set, caller.Options{Logger: quiet, BaseBackoff: time.Millisecond})
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
		if res.Error == nil || res.Error.Code != "attempt_timeout" || res.Attempts != 2 {
			t.Fatalf("result %+v error %+v", res, res.Error)
		}
	})
	t.Run("turn timeout bounds all attempts", func(t *testing.T) {
		ts, _ := startSandbox(t, sandbox.Options{Latency: 2 * time.Second})
		set := profileSet(ts.URL, func(p *profiles.Profile) { p.TurnTimeout = 300 * time.Millisecond; p.AttemptTimeout = 5 * time.Second })
		c := caller.New(set, caller.Options{Logger: quiet})
		began := time.Now()
		res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
		took := time.Since(began)
		if res.Error == nil || res.Error.Code != "turn_timeout" || res.Attempts != 1 || took < 300*time.Millisecond || took > time.Second {
			t.Fatalf("took %s result %+v error %+v", took, res, res.Error)
		}
	})
	t.Run("caller cancellation", func(t *testing.T) {
		ts, _ := startSandbox(t, sandbox.Options{Latency: 2 * time.Second})
		c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res := c.Call(ctx, caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
		if res.Error == nil || res.Error.Type != "cancelled" || ctx.Err() == nil {
			t.Fatalf("result %+v error %+v", res, res.Error)
		}
	})
}

func TestConcurrencyLimitPerBackend(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{Latency: 100 * time.Millisecond})
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.MaxConcurrent = 2 })
	set.Put(profiles.Profile{Name: "other", BaseURL: ts.URL + "/v1", MaxConcurrent: 2, Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true}})
	c := caller.New(set, caller.Options{Logger: quiet})
	var wg sync.WaitGroup
	began := time.Now()
	for i := range 6 {
		wg.Go(func() {
			if res := c.Call(context.Background(), caller.Input{TurnID: "t" + string(rune('a'+i)), Body: simpleBody(t, "x")}); res.Error != nil {
				t.Errorf("call %d: %+v", i, res.Error)
			}
		})
	}
	wg.Wait()
	if srv.MaxInFlight() != 2 {
		t.Fatalf("max in flight %d, want exactly 2", srv.MaxInFlight())
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("6 calls of 100ms two at a time took only %s", took)
	}
	// A second backend has its own slots: 2 + 2 in flight at once.
	for i := range 4 {
		backend := []string{"sb", "other"}[i%2]
		wg.Go(func() {
			c.Call(context.Background(), caller.Input{Backend: backend, TurnID: "u" + string(rune('a'+i)), Body: simpleBody(t, "x")})
		})
	}
	wg.Wait()
	if srv.MaxInFlight() != 4 {
		t.Fatalf("max in flight across two backends %d, want 4", srv.MaxInFlight())
	}
}

func TestUnknownBackendAndBadBody(t *testing.T) {
	c := caller.New(profileSet("http://127.0.0.1:1", nil), caller.Options{Logger: quiet})
	res := c.Call(context.Background(), caller.Input{Backend: "nope", TurnID: "t", Body: simpleBody(t, "x")})
	if res.Error == nil || res.Error.Type != "aptix_config" || !strings.Contains(res.Error.Message, "nope") {
		t.Fatalf("%+v", res.Error)
	}
	res = c.Call(context.Background(), caller.Input{TurnID: "t", Body: []byte(`[1,2]`)})
	if res.Error == nil || res.Error.Type != "aptix_invalid_request" || res.Attempts != 0 {
		t.Fatalf("%+v", res)
	}
}

// TestUnchangedBodyGoesVerbatim: a body the call does not change (no
// stream flag to set, no background, no replay) is sent as the envelope
// wrote it, byte for byte; one it changes is still a complete body.
func TestUnchangedBodyGoesVerbatim(t *testing.T) {
	var got [][]byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"resp_v","object":"response","status":"completed","output":[]}`)
	}))
	defer ts.Close()
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	body := `{"zeta":1,"model":"m","input":[{"role":"user","content":"x"}],"alpha":{"b":2,"a":1}}`
	if r := c.Call(context.Background(), caller.Input{TurnID: "v1", Body: json.RawMessage(body)}); r.Error != nil {
		t.Fatal(r.Error)
	}
	withStream := `{"stream":false,"model":"m","input":"x"}`
	if r := c.Call(context.Background(), caller.Input{TurnID: "v2", Body: json.RawMessage(withStream)}); r.Error != nil {
		t.Fatal(r.Error)
	}
	if len(got) != 2 || string(got[0]) != body {
		t.Fatalf("sent %q, want %q", got, body)
	}
	var sent map[string]any
	if err := json.Unmarshal(got[1], &sent); err != nil || sent["model"] != "m" || sent["input"] != "x" || sent["stream"] != nil {
		t.Fatalf("a changed body: %s (%v)", got[1], err)
	}
}
