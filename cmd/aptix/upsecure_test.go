package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// TestUpSecuresPublicNATSAndMCP: `APTIX_AUTH=keys aptix up --listen
// 0.0.0.0:P --mcp 0.0.0.0:M` served NATS (every stream) and the MCP endpoint
// to anyone. Now NATS refuses a connection without the nkey generated into
// the data dir (owner-only), accepts one with it, and the CLI on that data
// dir finds it by itself; the MCP endpoint answers 401 without an API key
// and serves a caller with one.
func TestUpSecuresPublicNATSAndMCP(t *testing.T) {
	t.Setenv("APTIX_AUTH", "keys")
	_, natsPort, _ := net.SplitHostPort(freeAddr(t))
	_, mcpPort, _ := net.SplitHostPort(freeAddr(t))
	oldMCP := upMCP
	upMCP = "0.0.0.0:" + mcpPort
	t.Cleanup(func() { upMCP = oldMCP })
	dir := t.TempDir()
	out, _ := startUpListen(t, dir, "0.0.0.0:"+natsPort, nil)
	seed := filepath.Join(dir, "nkeys", "aptix.nk")
	if !strings.Contains(out.String(), "credentials required: the nkey "+seed) {
		t.Errorf("the banner does not say NATS needs the nkey:\n%s", out)
	}
	if fi, err := os.Stat(seed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("nkey seed %s: %v, mode %v (want 0600)", seed, err, fi.Mode().Perm())
	}

	// NATS: refused without credentials, served with the nkey.
	if nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("NATS beyond loopback accepted a connection without credentials")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("unauthenticated NATS connection: %v, want an authorization violation", err)
	}
	opts, err := pipeline.AuthOptions("", seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		t.Fatalf("NATS with the generated nkey: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(context.Background(), contracts.StreamName); err != nil {
		t.Fatal(err)
	}

	// The CLI on the same data dir reaches it with no flag.
	if stdout, stderr, err := execTurn(t, execFlags{conversation: "secured"}, "Explain the guard"); err != nil || !strings.Contains(stdout, "Sandbox reply") {
		t.Fatalf("aptix exec against the secured up: %v\n%s\n%s", err, stdout, stderr)
	}

	// MCP: 401 without a credential or with a wrong one, served with a key.
	keys, err := auth.OpenKeys(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keys.Create(context.Background(), "mcp-test", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkMCPGuard(t, "http://127.0.0.1:"+mcpPort+"/mcp", key)

	// Standalone `aptix mcp --http` beyond loopback is guarded the same way.
	_, standalonePort, _ := net.SplitHostPort(freeAddr(t))
	ctx, cancel := context.WithCancel(context.Background())
	var banner strings.Builder
	done := make(chan error, 1)
	go func() { done <- runMCP(ctx, "0.0.0.0:"+standalonePort, "ws", &banner) }()
	t.Cleanup(func() { cancel(); <-done })
	standalone := "http://127.0.0.1:" + standalonePort + "/mcp"
	waitListening(t, "127.0.0.1:"+standalonePort, done)
	checkMCPGuard(t, standalone, key)
}

// checkMCPGuard: 401 without a credential or with a wrong one, 200 with key.
func checkMCPGuard(t *testing.T, url, key string) {
	t.Helper()
	for cred, want := range map[string]int{"": 401, "Bearer sk-aptix-not-a-key": 401, "Bearer " + key: 200} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if cred != "" {
			req.Header.Set("Authorization", cred)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("MCP initialize at %s with %q: %d, want %d", url, cred, resp.StatusCode, want)
		}
	}
}

// waitListening waits until addr accepts connections, or fails when the
// server's goroutine ended first.
func waitListening(t *testing.T, addr string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("server on %s ended before listening: %v", addr, err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s after 20 s", addr)
}

// TestUpRefusesOpenPublicMCP: the MCP endpoint beyond loopback with
// APTIX_AUTH unset is refused before anything starts, as the gateway is.
func TestUpRefusesOpenPublicMCP(t *testing.T) {
	t.Setenv("APTIX_AUTH", "")
	os.Unsetenv("APTIX_AUTH")
	oldMCP, oldHTTP, oldData := upMCP, upHTTP, dataDir
	upMCP, upHTTP, dataDir = "0.0.0.0:0", "", t.TempDir()
	t.Cleanup(func() { upMCP, upHTTP, dataDir = oldMCP, oldHTTP, oldData })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := runUp(ctx, freeAddr(t), &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "--mcp") || !strings.Contains(err.Error(), "APTIX_AUTH") {
		t.Fatalf("want a refusal naming --mcp and APTIX_AUTH, got %v", err)
	}
	// Standalone `aptix mcp --http` too, before it connects to anything.
	err = runMCP(ctx, "0.0.0.0:0", "ws", &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "--http") || !strings.Contains(err.Error(), "APTIX_AUTH") {
		t.Fatalf("aptix mcp --http 0.0.0.0:0 without APTIX_AUTH: want a refusal naming --http and APTIX_AUTH, got %v", err)
	}
}
