package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// server is a process the driver started: `aptix sandbox` or `aptix up`.
type server struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan error
	base string // its Responses API base URL, .../v1
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop interrupts the process (up drains its turns in flight) and kills it
// if it has not exited within grace.
func (s *server) stop(grace time.Duration) error {
	defer s.log.Close()
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-s.done:
		return exitErr(err)
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("pid %d did not stop within %s after an interrupt: killed", s.pid(), grace)
	}
}

// exitErr ignores the exit of a process stopped by the driver's interrupt.
func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == os.Interrupt {
			return nil
		}
		if ee.ExitCode() == 130 { // a CLI that maps an interrupt to 128+SIGINT
			return nil
		}
	}
	return err
}

func start(cmd *exec.Cmd, logPath string) (*server, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	s := &server{cmd: cmd, log: f, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	return s, nil
}

var listening = regexp.MustCompile(`listening on (http://\S+/v1)`)

// startSandbox runs `bin sandbox` on a port of its choosing and reads the
// address from the line it prints.
func startSandbox(ctx context.Context, bin, dir string) (*server, error) {
	cmd := exec.CommandContext(ctx, bin, "sandbox", "--addr", "127.0.0.1:0")
	cmd.Env = cleanEnv(nil)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s, err := start(cmd, filepath.Join(dir, "sandbox.log"))
	if err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				line <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case s.base = <-line:
		return s, nil
	case err := <-s.done:
		s.log.Close()
		return nil, fmt.Errorf("%s sandbox exited before listening (%v); see %s", bin, err, s.log.Name())
	case <-time.After(30 * time.Second):
		_ = s.stop(5 * time.Second)
		return nil, fmt.Errorf("%s sandbox printed no listening line in 30s", bin)
	}
}

// startUp runs `bin up` as shipped (its defaults, the environment's
// APTIX_* and OPENAI_* settings removed) on a fresh data dir and free
// ports, its model the sandbox at sandboxURL, and waits for /readyz.
func startUp(ctx context.Context, bin, dir, sandboxURL string, extraEnv []string) (*server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	httpAddr := ports[1]
	cmd := exec.CommandContext(ctx, bin, "up", "--data", filepath.Join(dir, "data"),
		"--listen", ports[0], "--http", httpAddr, "--mcp", ports[2])
	cmd.Env = cleanEnv(append([]string{"APTIX_SANDBOX_URL=" + sandboxURL}, extraEnv...))
	cmd.WaitDelay = 5 * time.Second
	s, err := start(cmd, filepath.Join(dir, "up.log"))
	if err != nil {
		return nil, err
	}
	s.base = "http://" + httpAddr + "/v1"
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			s.log.Close()
			return nil, fmt.Errorf("%s up exited before it was ready (%v); see %s", bin, err, s.log.Name())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.stop(10 * time.Second)
			return nil, fmt.Errorf("%s up not ready in 90s; see %s", bin, s.log.Name())
		}
	}
}

// cleanEnv is this process's environment without APTIX_* and OPENAI_*
// (a key or profile there would send the load to a real model, or change
// what is measured from what up ships), plus extra.
func cleanEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "APTIX_") || strings.HasPrefix(kv, "OPENAI_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// freePorts are n loopback addresses free a moment ago.
func freePorts(n int) ([]string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// loadAvg is /proc/loadavg's first three fields: how busy the machine was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}
