package docs

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The default addresses the docs are written for, and what the test
// substitutes for each in a block (docs/README.md#runnable-blocks).
var defaultAddrs = []struct{ name, addr string }{
	{"nats", "127.0.0.1:4222"},
	{"http", "127.0.0.1:8080"},
	{"mcp", "127.0.0.1:8090"},
	{"sandbox", "127.0.0.1:8089"},
}

// TestRunnableDocs runs every block marked runnable in README.md and
// docs/*.md, in that order, against one `make run` (bin/aptix up, built from
// this tree) on free ports with a temporary data directory and the sandbox
// model. Each block is its own `bash -euo pipefail` script run from the
// repository root with bin/ first on PATH; it must exit 0 and, when its
// marker has one, print output matching the marker's regexp.
func TestRunnableDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts aptix up")
	}
	root := repoRoot(t)
	blocks := runnableBlocks(t, root)
	if !slices.ContainsFunc(blocks, func(b Block) bool { return b.File == "README.md" }) {
		t.Fatal("README.md has no runnable block: its first commands must be checked")
	}
	for _, tool := range []string{"bash", "make", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the docs' commands need %s: %v", tool, err)
			}
			t.Skipf("the docs' commands need %s, which is not installed", tool)
		}
	}

	addrs := map[string]string{}
	for _, d := range defaultAddrs {
		addrs[d.name] = freeAddr(t)
	}
	data := t.TempDir()
	env := serverEnv(addrs)
	stop := startServer(t, root, data, addrs, env)
	defer stop()

	env = append(env,
		"PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"APTIX_NATS_URL=nats://"+addrs["nats"],
		"APTIX_DATA="+data,
	)
	for _, b := range blocks {
		runBlock(t, root, env, addrs, b)
	}
}

// runnableBlocks extracts README.md's blocks, then docs/*.md's in name order.
func runnableBlocks(t *testing.T, root string) []Block {
	files := []string{"README.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pages)
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
	}
	var blocks []Block
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := Extract(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	return blocks
}

// serverEnv is the environment without anything that would pick a real
// model, require credentials or leak the caller's make into ours.
func serverEnv(addrs map[string]string) []string {
	drop := []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "APTIX_PROFILES", "APTIX_BACKEND", "APTIX_AUTH",
		"APTIX_NATS_URL", "APTIX_NATS_CREDS", "APTIX_NATS_NKEY", "APTIX_DATA", "APTIX_SANDBOX_URL",
		"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) && k != "PATH" {
			env = append(env, kv)
		}
	}
	return append(env, "APTIX_SANDBOX_URL=http://"+addrs["sandbox"]+"/v1")
}

// startServer runs `make run` (it builds bin/aptix and runs bin/aptix up) in
// its own process group and waits until the gateway is ready and the banner
// printed. The returned stop sends Ctrl-C to the group and waits for the
// drain, killing the group if it takes more than a minute.
func startServer(t *testing.T, root, data string, addrs map[string]string, env []string) (stop func()) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "up.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := fmt.Sprintf("ARGS=--listen %s --http %s --mcp %s --data %s", addrs["nats"], addrs["http"], addrs["mcp"], data)
	cmd := exec.Command("make", "-s", "run", args)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, logFile, logFile
	cmd.Env = append(slices.Clone(env), "PATH="+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("make run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("aptix up did not stop within a minute of Ctrl-C; log:\n%s", tail(logPath))
		}
		logFile.Close()
	}

	// The first build of bin/aptix can take minutes on a cold cache.
	deadline := time.Now().Add(10 * time.Minute)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-done:
			logFile.Close()
			t.Fatalf("make run exited before it was ready (%v); log:\n%s", err, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("aptix up not ready within 10 minutes; log:\n%s", tail(logPath))
		}
		if res, err := client.Get("http://" + addrs["http"] + "/readyz"); err == nil {
			res.Body.Close()
			if log, _ := os.ReadFile(logPath); res.StatusCode == http.StatusOK && bytes.Contains(log, []byte("Aptix is up.")) {
				return stop
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runBlock runs one block with the docs' default addresses replaced by the
// test server's, and reports a failure with the block and its output.
func runBlock(t *testing.T, root string, env []string, addrs map[string]string, b Block) {
	t.Helper()
	script := b.Script
	for _, d := range defaultAddrs {
		script = strings.ReplaceAll(script, d.addr, addrs[d.name])
		script = strings.ReplaceAll(script, "localhost"+strings.TrimPrefix(d.addr, "127.0.0.1"), addrs[d.name])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = root, env
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err != nil:
		t.Errorf("%s:%d: block failed after %s: %v\n--- script\n%s--- output\n%s", b.File, b.Line, took, err, script, out)
	case b.Expect != nil && !b.Expect.Match(out):
		t.Errorf("%s:%d: output does not match %q\n--- script\n%s--- output\n%s", b.File, b.Line, b.Expect, script, out)
	default:
		t.Logf("%s:%d: ok in %s", b.File, b.Line, took)
	}
}

// tail is the end of a log, for a failure message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// repoRoot is the directory holding go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}
