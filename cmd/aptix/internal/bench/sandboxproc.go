package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// sandboxProcess is `aptix sandbox` in a child process: 10,000 calls in
// flight need 10,000 connections at each end, more file descriptors than
// one process may have beside the bus, and the soak's RSS is the pipeline's.
type sandboxProcess struct {
	url string
	cmd *exec.Cmd
}

func startSandboxProcess(ctx context.Context, latency time.Duration) (*sandboxProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, exe, "sandbox", "--addr", addr, "--latency", latency.String())
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sp := &sandboxProcess{url: "http://" + addr + "/v1", cmd: cmd}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, _, err := sp.requests(); err == nil {
			return sp, nil
		}
		if time.Now().After(deadline) {
			sp.close()
			return nil, fmt.Errorf("sandbox process on %s not ready", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *sandboxProcess) baseURL() string { return s.url }

func (s *sandboxProcess) requests() (int, int, error) {
	resp, err := http.Get(s.url + "/_sandbox/stats")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var st sandbox.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, 0, err
	}
	return st.Requests, st.MaxInFlight, nil
}

func (s *sandboxProcess) close() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
