package stack

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestProfilePointingAtItsOwnGateway: a backend profile whose base URL is
// the deployment's own gateway (the default, so every nested turn would
// call it again) ends the turn with loop_detected in well under a second,
// instead of each turn calling the next until the turn timeout; the
// gateway refuses the looped call before authentication, with 508.
func TestProfilePointingAtItsOwnGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := "http://" + ln.Addr().String()
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Profiles.Put(profiles.Profile{Name: "self", BaseURL: self + "/v1", DefaultModel: "self-model",
			AttemptTimeout: 3 * time.Second, TurnTimeout: 4 * time.Second, MaxRetries: 2, MaxConcurrent: 8,
			Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}})
		c.Profiles.Default = "self"
	})
	srv, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.SyncTimeout = 15 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)

	start := time.Now()
	done := e.turn(contracts.AgentExecuteRequest{ConversationId: "c-loop", TurnId: "t-loop", Instruction: "hello"})
	took := time.Since(start)
	r := done.Response
	if r.Kind != contracts.KindError || r.ErrorCode != contracts.CodeLoopDetected || !strings.Contains(r.ErrorMessage, "baseUrl points at this gateway") {
		t.Fatalf("after %s: %+v", took, r)
	}
	if took > time.Second {
		t.Fatalf("loop detected after %s, want under a second", took)
	}
	// Exactly one call reached the gateway: refused, not retried.
	if n := e.sb.Requests(); n != 0 {
		t.Fatalf("the sandbox got %d calls", n)
	}

	// The refusal itself, as any client would see it.
	req, _ := http.NewRequest("POST", self+"/v1/responses", strings.NewReader(`{"model":"x","input":"hi"}`))
	req.Header.Set(contracts.HeaderHop, "other-deployment, "+hopOf(t, e))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusLoopDetected {
		t.Fatalf("status %d, want 508", resp.StatusCode)
	}
	// Another deployment's mark is no loop.
	req, _ = http.NewRequest("GET", self+"/v1/models", nil)
	req.Header.Set(contracts.HeaderHop, "other-deployment")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another deployment's call: status %d", resp.StatusCode)
	}
}

func hopOf(t *testing.T, e *env) string {
	t.Helper()
	return pipeline.DeploymentMark(context.Background(), e.js)
}
