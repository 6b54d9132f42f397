package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/llmcaller/cli"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// syncBuffer is a bytes.Buffer safe to read while the command writes.
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

func TestSandboxCommandServesScriptAndStops(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`["scripted answer"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := cli.SandboxCommand()
	out := &syncBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--script", script, "--fail-first", "1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	re := regexp.MustCompile(`aptix sandbox \(NOT a model\) listening on (http://127\.0\.0\.1:\d+/v1)`)
	var base string
	for deadline := time.Now().Add(5 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("no listening line in %q", out.String())
	}
	postOnce := func() (int, string) {
		resp, err := http.Post(base+"/responses", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := postOnce(); status != 500 {
		t.Fatalf("--fail-first 1: first status %d", status)
	}
	if status, body := postOnce(); status != 200 || !strings.Contains(body, `"text":"scripted answer"`) {
		t.Fatalf("second: %d %s", status, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("command did not stop on cancel")
	}
}

func TestSandboxCommandRejectsBadScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(script, []byte(`{"not":"an array"}`), 0o600)
	cmd := cli.SandboxCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--script", script})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "JSON array of strings") {
		t.Fatalf("err %v", err)
	}
}

// The help states the answering rules, so nobody mistakes the sandbox
// for a model.
func TestSandboxHelpStatesTheRules(t *testing.T) {
	cmd := cli.SandboxCommand()
	if !strings.Contains(cmd.Long, reply.Rules) || !strings.Contains(cmd.Long, "data: [DONE]") || !strings.Contains(cmd.Long, "not a model") {
		t.Fatalf("help:\n%s", cmd.Long)
	}
}
