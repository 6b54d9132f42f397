package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// withFlaky makes "flaky" the default profile: a backend of its own
// answering every call with 529, falling back to the env's sandbox, which
// re-attaches when reattach is set.
func withFlaky(t *testing.T, reattach bool) (*sandbox.Server, func(*Config)) {
	flaky := sandbox.New(sandbox.Options{Logger: quiet})
	hs := httptest.NewServer(flaky)
	t.Cleanup(hs.Close)
	return flaky, func(c *Config) {
		c.Profiles.Put(profiles.Profile{Name: "flaky", BaseURL: hs.URL + "/v1", DefaultModel: "flaky-1", Sandbox: true,
			AttemptTimeout: time.Second, TurnTimeout: 4 * time.Second, MaxRetries: 0, MaxConcurrent: 8,
			Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative},
			Headers:      map[string]string{"X-Sandbox-Fault": "529"}, Fallbacks: []string{"sandbox"}})
		sb, _ := c.Profiles.Get("sandbox")
		sb.Capabilities.Reattach = reattach
		c.Profiles.Put(sb)
		c.Profiles.Default = "flaky"
	}
}

// TestGatewayFallbackBackend: a client whose model's backend answers 529
// gets the fallback's answer, and the X-Aptix-Backend header and the
// turn's backend field name the backend that served.
func TestGatewayFallbackBackend(t *testing.T) {
	flaky, edit := withFlaky(t, false)
	e := newEnv(t, sandbox.Options{}, edit)
	url, _ := e.gateway()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(`{"model":"flaky-1","input":"fall back"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Aptix-Backend") != "sandbox" {
		t.Fatalf("HTTP %d, X-Aptix-Backend %q: %s", resp.StatusCode, resp.Header.Get("X-Aptix-Backend"), body)
	}
	if flaky.Requests() != 1 || e.sb.Requests() != 1 {
		t.Fatalf("the flaky backend got %d calls, the fallback %d: want 1 each", flaky.Requests(), e.sb.Requests())
	}
	done := e.lastTurn()
	if done.Response.Backend != "sandbox" || len(done.LLM.Fallbacks) != 1 || done.LLM.Fallbacks[0].Status != 529 {
		t.Fatalf("backend %q, fallbacks %+v", done.Response.Backend, done.LLM.Fallbacks)
	}
}

// lastTurn is the newest completed turn's event.
func (e *env) lastTurn() contracts.Turn {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), "aptix.completed.>")
	if err != nil {
		e.t.Fatal(err)
	}
	var turn contracts.Turn
	if err := json.Unmarshal(m.Data, &turn); err != nil || turn.Response == nil || turn.LLM == nil {
		e.t.Fatalf("completed event: %v %s", err, m.Data)
	}
	return turn
}

// TestStageCrashMidFallbackPaysOnce: the LLM caller dies while the
// fallback's call is in flight (its upstream response created, so paid
// for). The restarted stage's redelivery neither calls the failing
// backend again nor creates a second response on the fallback: it resumes
// the chain at the fallback's call record and re-attaches to that call.
func TestStageCrashMidFallbackPaysOnce(t *testing.T) {
	flaky, edit := withFlaky(t, true)
	e := newEnv(t, sandbox.Options{Latency: 800 * time.Millisecond}, edit,
		func(c *Config) { c.Only = []string{"retriever", "envelope", "mapper"} })

	doomed, _ := natstest.Connect(t, e.url)
	crashing := e.cfg
	crashing.Only = []string{"llmcaller"}
	crashCtx, crashCancel := context.WithCancel(context.Background())
	defer crashCancel()
	ready := make(chan struct{})
	go func() { _ = Run(crashCtx, doomed, crashing, ready) }()
	<-ready

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := contracts.AgentExecuteRequest{ConversationId: "conv-fb-crash", TurnId: "t1", Instruction: "survive the fallback", RagScope: contracts.RagScopeNone}
	if err := client.Submit(ctx, e.js, req); err != nil {
		t.Fatal(err)
	}
	for e.sb.Snapshot().Created == 0 {
		if ctx.Err() != nil {
			t.Fatal("the fallback was never called")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the call record names the upstream response
	doomed.Close()                     // the process is gone: no ack, no publish
	primary := flaky.Requests()

	fresh, _ := natstest.Connect(t, e.url)
	restarted := e.cfg
	restarted.Only = []string{"llmcaller"}
	e.run(fresh, restarted)

	done := e.await(ctx, "conv-fb-crash", "t1")
	if done.Response.Kind != contracts.KindOK || done.Response.Backend != "sandbox" {
		t.Fatalf("%+v", done.Response)
	}
	e.settled()
	if n := flaky.Requests(); n != primary {
		t.Errorf("the failing backend was called again after the crash: %d calls, %d before", n, primary)
	}
	if st := e.sb.Snapshot(); st.Created != 1 {
		t.Errorf("the fallback created %d upstream responses, want 1 (pay once)", st.Created)
	}
	if n := e.count(contracts.Subject(contracts.StageResponded, "conv-fb-crash", "t1")); n != 1 {
		t.Errorf("%d responded events, want exactly 1", n)
	}
}

// TestFallbackCancelsATimedOutBackgroundCall: a first backend that keeps
// its calls in the background (reattach) and timed out is still
// generating, and billing: its upstream response is cancelled before the
// fallback is called, and the response says so.
func TestFallbackCancelsATimedOutBackgroundCall(t *testing.T) {
	slow := sandbox.New(sandbox.Options{Logger: quiet, Latency: 3 * time.Second})
	hs := httptest.NewServer(slow)
	t.Cleanup(hs.Close)
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Profiles.Put(profiles.Profile{Name: "slow", BaseURL: hs.URL + "/v1", DefaultModel: "slow-1", Sandbox: true,
			AttemptTimeout: 300 * time.Millisecond, TurnTimeout: 4 * time.Second, MaxRetries: 0, MaxConcurrent: 8,
			Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative, Reattach: true},
			Fallbacks:    []string{"sandbox"}})
		c.Profiles.Default = "slow"
	})
	done := e.turn(contracts.AgentExecuteRequest{ConversationId: "conv-fb-slow", TurnId: "t1", Instruction: "too slow", RagScope: contracts.RagScopeNone})
	if done.Response.Kind != contracts.KindOK || done.Response.Backend != "sandbox" {
		t.Fatalf("%+v", done.Response)
	}
	if st := slow.Snapshot(); st.Created != 1 || st.Cancels != 1 {
		t.Errorf("the slow backend created %d responses and cancelled %d: want its one cancelled", st.Created, st.Cancels)
	}
	if !strings.Contains(strings.Join(done.Response.Warnings, "\n"), "cancelled before falling back") {
		t.Errorf("warnings %q", done.Response.Warnings)
	}
}
