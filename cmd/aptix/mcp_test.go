package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/retriever/mcpserver"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

const mcpBackoffGo = `package retry

// NextDelay doubles the delay before the next attempt, up to a ceiling.
func NextDelay(prev, ceiling int) int {
	return min(2*prev, ceiling)
}
`

// mcpIndexed starts a NATS server whose chunk store holds one indexed
// repository (workspace ws, repo demo) and returns its URL.
func mcpIndexed(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	_, url := natstest.Start(t)
	_, js := natstest.Connect(t, url)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "retry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "retry", "backoff.go"), []byte(mcpBackoffGo), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := retrieval.IndexDir(context.Background(), js, root, retrieval.IndexOptions{Workspace: "ws", Repo: "demo"}); err != nil {
		t.Fatal(err)
	}
	return url, js
}

func mcpConnect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "aptix-test", Version: "v0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpSearchBackoff calls search_code until the index has loaded (a fresh
// `aptix mcp` answers "still loading" until then) and checks the hit.
func mcpSearchBackoff(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_code",
			Arguments: map[string]any{"query": "next delay doubles attempt", "workspace": "ws"}})
		if err != nil {
			t.Fatalf("search_code: %v", err)
		}
		txt := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				txt += tc.Text
			}
		}
		if res.IsError && strings.Contains(txt, "still loading") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if res.IsError || !strings.Contains(txt, "retry/backoff.go:3-6") || !strings.Contains(txt, "func NextDelay(prev, ceiling int) int") {
			t.Fatalf("search_code answered (error %v):\n%s", res.IsError, txt)
		}
		return
	}
}

func TestServeMCPSearchOverHTTP(t *testing.T) {
	_, js := mcpIndexed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ix, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := mcpserver.NewSource(ctx, js, ix)
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := serveMCP(ctx, src, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[1-9][0-9]*/mcp$`).MatchString(url) {
		t.Fatalf("endpoint %q", url)
	}
	cs := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}) // with its standalone SSE stream
	mcpSearchBackoff(t, cs)

	// stop ends the open SSE stream instead of waiting for it (given a
	// moment to open: the client starts it after initialization).
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stop took %v", took)
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil); err == nil {
		t.Error("still serving after stop")
	}

	// Cancelling the context stops it too.
	sctx, scancel := context.WithCancel(ctx)
	url2, stop2, err := serveMCP(sctx, src, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	mcpSearchBackoff(t, mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: url2, MaxRetries: -1, DisableStandaloneSSE: true}))
	scancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "v0"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url2, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still serving after its context ended")
		}
	}
}

// lockedBuffer is an io.Writer read while runMCP writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMCPCommand runs `aptix mcp` against a NATS server as a running `aptix
// up` would offer it: over HTTP in-process, then over stdio as a separate
// process on the same data dir (whose local index the first one holds).
func TestMCPCommand(t *testing.T) {
	url, _ := mcpIndexed(t)
	oldURL, oldData := natsURL, dataDir
	natsURL, dataDir = url, t.TempDir()
	defer func() { natsURL, dataDir = oldURL, oldData }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- runMCP(ctx, "127.0.0.1:0", "ws", &out) }()
	endpoint := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/mcp`)
	for deadline := time.Now().Add(20 * time.Second); endpoint.FindString(out.String()) == ""; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("aptix mcp ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no endpoint printed: %q", out.String())
		}
	}
	if !strings.Contains(out.String(), `"mcpServers"`) {
		t.Errorf("banner without a client configuration: %q", out.String())
	}
	mcpSearchBackoff(t, mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: endpoint.FindString(out.String()), MaxRetries: -1}))

	t.Run("stdio", func(t *testing.T) {
		var stderr lockedBuffer
		cmd := exec.Command(os.Args[0], "-test.run=^TestMCPStdioProcess$")
		cmd.Env = append(os.Environ(), envMCPStdioArgs+"=--nats "+url+" --data "+dataDir+" mcp --stdio --workspace ws")
		cmd.Stderr = &stderr
		cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
		mcpSearchBackoff(t, cs)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file_lines", Arguments: map[string]any{"path": "retry/backoff.go", "start": 4, "end": 4}})
		if err != nil || res.IsError {
			t.Fatalf("read_file_lines: %v %+v", err, res)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "     4\tfunc NextDelay(prev, ceiling int) int {\n") {
			t.Errorf("read_file_lines: %+v", res.Content)
		}
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := cmd.Wait(); err != nil && cmd.ProcessState == nil {
			t.Errorf("wait: %v", err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("aptix mcp --stdio exited %d after the client hung up; stderr:\n%s", code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "using a temporary one") {
			t.Errorf("the second server on the data dir did not fall back to a temporary index; stderr:\n%s", stderr.String())
		}
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("aptix mcp: %v", err)
		}
	case <-time.After(3 * time.Second): // an open SSE stream must not hold it up
		t.Fatal("aptix mcp did not stop within 3s of its context ending")
	}
}

// envMCPStdioArgs makes TestMCPStdioProcess run the CLI with these
// arguments: the test binary stands in for bin/aptix, which is slow to link.
const envMCPStdioArgs = "APTIX_TEST_MCP_STDIO_ARGS"

func TestMCPStdioProcess(t *testing.T) {
	args := os.Getenv(envMCPStdioArgs)
	if args == "" {
		t.Skip("run by TestMCPCommand as an `aptix mcp --stdio` process")
	}
	os.Exit(execute(strings.Fields(args), os.Stderr))
}

func TestMCPUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"mcp", "--workspace", "a b"}, `--workspace "a b"`},
		{[]string{"mcp", "--stdio", "--http", "127.0.0.1:0"}, "give one transport"},
	} {
		code, stderr := cli(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.says) {
			t.Errorf("aptix %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.says)
		}
	}
}
