package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/toolrunner/mcp/mcptest"
)

// stdioServer runs this test binary as a stdio MCP server (see TestMain).
func stdioServer(t *testing.T) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Type: TypeStdio, Command: exe, Env: map[string]string{mcptest.StdioEnv: "1"}}
}

// child returns the running stdio subprocess of a registry's server.
func child(t *testing.T, r *Registry, label string) *exec.Cmd {
	t.Helper()
	s := r.servers[label]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		t.Fatalf("server %q has no running child", label)
	}
	return s.cmd
}

// waitGone waits until pid no longer exists (it has exited and been reaped).
func waitGone(pid int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
	}
	return false
}

func TestRegistryStdio(t *testing.T) {
	r := NewRegistry(Config{Servers: map[string]ServerConfig{"local": stdioServer(t)}}, Options{Logger: slog.New(slog.DiscardHandler)})
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = r.Close()
		}
	})
	ctx := context.Background()

	st := r.List(ctx, []string{"local"})
	if st[0].Err != nil {
		t.Fatalf("List: %v", st[0].Err)
	}
	if names := toolNames(st[0].Tools); !slices.Equal(names, []string{"add", "echo", "fail", "sleep"}) {
		t.Errorf("tools = %v", names)
	}
	res, err := r.Call(ctx, "local", "add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.Output != "5" {
		t.Fatalf("add: %+v, %v", res, err)
	}

	cmd := child(t, r, "local")
	pid := cmd.Process.Pid
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("child %d not running before Close: %v", pid, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	if cmd.ProcessState == nil {
		t.Error("Close returned before the child was reaped")
	}
	if !waitGone(pid, 5*time.Second) {
		t.Errorf("child %d still exists after Close", pid)
	}
}

func TestRegistryStdioReconnectsAfterChildDies(t *testing.T) {
	r := newTestRegistry(t, map[string]ServerConfig{"local": stdioServer(t)}, Options{})
	ctx := context.Background()
	if res, err := r.Call(ctx, "local", "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil || res.Output != "2" {
		t.Fatalf("add: %+v, %v", res, err)
	}
	first := child(t, r, "local")
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	res, err := r.Call(ctx, "local", "add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.Output != "5" {
		t.Fatalf("add after the child died: %+v, %v", res, err)
	}
	if second := child(t, r, "local"); second.Process.Pid == first.Process.Pid {
		t.Error("still the dead child's pid: no new subprocess was started")
	}
}
