package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/toolrunner/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.RunStdioIfAsked() // the stdio tests run this binary as their server
	m.Run()
}

func newTestRegistry(t *testing.T, servers map[string]ServerConfig, o Options) *Registry {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := NewRegistry(Config{Servers: servers}, o)
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// forEachHTTP runs test against a server with sessions (protocol 2025-11-25)
// and a stateless one (2026-07-28: notifications on subscriptions/listen).
func forEachHTTP(t *testing.T, test func(*testing.T, func(testing.TB) *mcptest.Server)) {
	t.Run("sessions", func(t *testing.T) { test(t, mcptest.NewHTTP) })
	t.Run("stateless", func(t *testing.T) { test(t, mcptest.NewStatelessHTTP) })
}

func httpServer(url string) ServerConfig { return ServerConfig{Type: TypeHTTP, URL: url} }

func toolNames(tools []Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

func TestRegistryListHTTP(t *testing.T) { forEachHTTP(t, testRegistryListHTTP) }

func testRegistryListHTTP(t *testing.T, serve func(testing.TB) *mcptest.Server) {
	srv := serve(t)
	r := newTestRegistry(t, map[string]ServerConfig{
		"test": httpServer(srv.URL),
		"off":  {URL: "http://off", Disabled: true},
	}, Options{})

	if got := r.Labels(); !slices.Equal(got, []string{"test"}) {
		t.Errorf("Labels() = %v, want [test] (disabled servers excluded)", got)
	}
	if !r.Has("test") || r.Has("off") || r.Has("nope") {
		t.Errorf("Has: test=%v off=%v nope=%v", r.Has("test"), r.Has("off"), r.Has("nope"))
	}

	got := r.List(context.Background(), []string{"test", "nope"})
	if len(got) != 2 || got[0].Server != "test" || got[1].Server != "nope" {
		t.Fatalf("List order: %+v", got)
	}
	if got[0].Err != nil {
		t.Fatalf("List: %v", got[0].Err)
	}
	if !errors.Is(got[1].Err, ErrUnknownServer) {
		t.Errorf("unknown label: Err = %v, want ErrUnknownServer", got[1].Err)
	}
	if names := toolNames(got[0].Tools); !slices.Equal(names, []string{"add", "echo", "fail", "sleep"}) {
		t.Errorf("tools = %v", names)
	}
	for _, tool := range got[0].Tools {
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties == nil {
			t.Errorf("%s: input schema %s is not an object schema with properties (%v)", tool.Name, tool.InputSchema, err)
		}
		if tool.Server != "test" || tool.Description == "" {
			t.Errorf("%s: server %q, description %q", tool.Name, tool.Server, tool.Description)
		}
		if tool.Name == "add" {
			if _, ok := schema.Properties["a"]; !ok {
				t.Errorf("add's schema lacks property a: %s", tool.InputSchema)
			}
		}
	}
}

func TestRegistryCallHTTP(t *testing.T) { forEachHTTP(t, testRegistryCallHTTP) }

func testRegistryCallHTTP(t *testing.T, serve func(testing.TB) *mcptest.Server) {
	srv := serve(t)
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer(srv.URL)}, Options{})
	ctx := context.Background()

	res, err := r.Call(ctx, "test", "add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.Output != "5" || res.IsError {
		t.Errorf("add: %+v, %v; want output 5", res, err)
	}
	res, err = r.Call(ctx, "test", "echo", json.RawMessage(` {"text":"héllo\nworld"} `))
	if err != nil || res.Output != "héllo\nworld" {
		t.Errorf("echo: %+v, %v", res, err)
	}
	for _, args := range []string{"", "null", "{}"} {
		res, err = r.Call(ctx, "test", "fail", json.RawMessage(args))
		if err != nil || !res.IsError || res.Output != mcptest.FailMessage {
			t.Errorf("fail(%q): %+v, %v; want IsError with %q", args, res, err, mcptest.FailMessage)
		}
	}
	if n := srv.Calls("fail"); n != 3 {
		t.Errorf("fail ran %d times, want 3", n)
	}

	if _, err := r.Call(ctx, "nope", "add", nil); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("unknown server: %v", err)
	}
	for _, bad := range []string{`[1,2]`, `"x"`, `{"a":`} {
		if _, err := r.Call(ctx, "test", "add", json.RawMessage(bad)); err == nil {
			t.Errorf("args %s: no error", bad)
		}
	}
	if _, err := r.Call(ctx, "test", "no_such_tool", nil); err == nil {
		t.Error("unknown tool: no error")
	}
	// The rejected calls above must not have broken the session.
	if res, err := r.Call(ctx, "test", "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil || res.Output != "2" {
		t.Errorf("add after errors: %+v, %v", res, err)
	}
}

func TestRegistryCallTimeout(t *testing.T) { forEachHTTP(t, testRegistryCallTimeout) }

func testRegistryCallTimeout(t *testing.T, serve func(testing.TB) *mcptest.Server) {
	srv := serve(t)
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer(srv.URL)}, Options{})
	if _, err := r.Call(context.Background(), "test", "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil {
		t.Fatal(err) // connect first, so the timeout below measures the call only
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Call(ctx, "test", "sleep", json.RawMessage(`{"ms":10000}`))
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("Call returned after %s; the deadline was 200ms", elapsed)
	}
	// The session survives a cancelled call.
	if res, err := r.Call(context.Background(), "test", "add", json.RawMessage(`{"a":1,"b":2}`)); err != nil || res.Output != "3" {
		t.Errorf("add after timeout: %+v, %v", res, err)
	}
}

func TestRegistryParallelCalls(t *testing.T) { forEachHTTP(t, testRegistryParallelCalls) }

func testRegistryParallelCalls(t *testing.T, serve func(testing.TB) *mcptest.Server) {
	srv := serve(t)
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer(srv.URL)}, Options{})

	const n, sleep = 10, 300 * time.Millisecond
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]string, n)
	for i := range n { // no warm-up: the first calls also share one connect
		wg.Go(func() {
			res, err := r.Call(context.Background(), "test", "sleep", json.RawMessage(`{"ms":300}`))
			outs[i], errs[i] = res.Output, err
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := range n {
		if errs[i] != nil || outs[i] != "slept 300ms" {
			t.Errorf("call %d: %q, %v", i, outs[i], errs[i])
		}
	}
	// Serially this takes 3s; concurrently about 300ms. 2s leaves room for a
	// loaded machine and still fails if calls were serialized.
	if elapsed >= 2*time.Second {
		t.Errorf("%d concurrent %s sleeps took %s: calls were serialized", n, sleep, elapsed)
	}
	if got := srv.Calls("sleep"); got != n {
		t.Errorf("sleep ran %d times, want %d", got, n)
	}
}

func TestRegistryHeadersFromEnv(t *testing.T) {
	mcpHandler := mcptest.New().Handler()
	var mu sync.Mutex
	var seen []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.Header.Get("Authorization")+"|"+req.Header.Get("X-Tenant"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, req)
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })

	cfg, err := ParseConfig([]byte(`{"mcpServers":{"docs":{"url":"`+hs.URL+`/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}","X-Tenant":"${TENANT:-acme}"}}}}`),
		envOf(map[string]string{"DOCS_TOKEN": "tok-123"}))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = r.Close() })
	if res, err := r.Call(context.Background(), "docs", "add", json.RawMessage(`{"a":2,"b":3}`)); err != nil || res.Output != "5" {
		t.Fatalf("add: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no request reached the server")
	}
	for i, h := range seen {
		if h != "Bearer tok-123|acme" {
			t.Errorf("request %d carried %q, want %q", i, h, "Bearer tok-123|acme")
		}
	}
}

// countingHandler counts the JSON-RPC requests of one method reaching h.
func countingHandler(h http.Handler, method string, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == method {
				n.Add(1)
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
	})
}

func TestRegistryListCachedUntilTTL(t *testing.T) {
	srv := mcptest.New()
	var lists atomic.Int32
	hs := httptest.NewServer(countingHandler(srv.Handler(), "tools/list", &lists))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })

	const ttl = 300 * time.Millisecond
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer(hs.URL)}, Options{TTL: ttl})
	ctx := context.Background()
	for range 3 {
		if st := r.List(ctx, []string{"test"}); st[0].Err != nil || len(st[0].Tools) != 4 {
			t.Fatalf("List: %+v", st[0])
		}
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("3 Lists within the TTL sent %d tools/list, want 1", n)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	if st := r.List(ctx, []string{"test"}); st[0].Err != nil {
		t.Fatal(st[0].Err)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("after the TTL: %d tools/list, want 2", n)
	}
}

func TestRegistryListChanged(t *testing.T) { forEachHTTP(t, testRegistryListChanged) }

func testRegistryListChanged(t *testing.T, serve func(testing.TB) *mcptest.Server) {
	srv := serve(t)
	// An hour's TTL: only the notification can make the new tool appear.
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer(srv.URL)}, Options{TTL: time.Hour})
	ctx := context.Background()
	if st := r.List(ctx, []string{"test"}); st[0].Err != nil || len(st[0].Tools) != 4 {
		t.Fatalf("List: %+v", st[0])
	}

	srv.AddTool("shout", "Upper-cases nothing, says hi.", func(context.Context, json.RawMessage) (string, error) {
		return "HI", nil
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := r.List(ctx, []string{"test"})
		if st[0].Err != nil {
			t.Fatal(st[0].Err)
		}
		if slices.Contains(toolNames(st[0].Tools), "shout") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s the list still lacks the added tool: %v", toolNames(st[0].Tools))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, err := r.Call(ctx, "test", "shout", nil); err != nil || res.Output != "HI" {
		t.Errorf("shout: %+v, %v", res, err)
	}
}

// reservePort returns a local address nothing listens on (for now).
func reservePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveAt serves h at addr until the returned stop is called (or the test ends).
func serveAt(t *testing.T, addr string, h http.Handler) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	hs := httptest.NewUnstartedServer(h)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	var once sync.Once
	stop = func() { once.Do(func() { hs.CloseClientConnections(); hs.Close() }) }
	t.Cleanup(stop)
	return stop
}

func TestRegistryDownServerIsReportedThenReached(t *testing.T) {
	up := mcptest.NewHTTP(t)
	addr := reservePort(t)
	r := newTestRegistry(t, map[string]ServerConfig{
		"up":   httpServer(up.URL),
		"down": httpServer("http://" + addr + "/mcp"),
	}, Options{ConnectTimeout: 3 * time.Second})
	ctx := context.Background()

	start := time.Now()
	st := r.List(ctx, []string{"down", "up"})
	if st[0].Err == nil || len(st[0].Tools) != 0 {
		t.Errorf("down: %+v, want an error and no tools", st[0])
	}
	if st[1].Err != nil || len(st[1].Tools) != 4 {
		t.Errorf("up: %+v, want its 4 tools", st[1])
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("a refused connection took %s to report", elapsed)
	}
	if _, err := r.Call(ctx, "down", "add", nil); err == nil {
		t.Error("Call on a down server: no error")
	}

	late := mcptest.New()
	serveAt(t, addr, late.Handler())
	st = r.List(ctx, []string{"down"})
	if st[0].Err != nil || len(st[0].Tools) != 4 {
		t.Fatalf("after the server came up: %+v", st[0])
	}
	if res, err := r.Call(ctx, "down", "add", json.RawMessage(`{"a":2,"b":3}`)); err != nil || res.Output != "5" {
		t.Errorf("add: %+v, %v", res, err)
	}
}

func TestRegistryCallReconnectsAfterServerRestart(t *testing.T) {
	addr := reservePort(t)
	first := mcptest.New()
	stop := serveAt(t, addr, first.Handler())
	r := newTestRegistry(t, map[string]ServerConfig{"test": httpServer("http://" + addr + "/mcp")}, Options{})
	ctx := context.Background()
	if res, err := r.Call(ctx, "test", "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil || res.Output != "2" {
		t.Fatalf("add: %+v, %v", res, err)
	}

	stop() // the new server knows nothing of the old session
	second := mcptest.New()
	serveAt(t, addr, second.Handler())
	if res, err := r.Call(ctx, "test", "add", json.RawMessage(`{"a":2,"b":3}`)); err != nil || res.Output != "5" {
		t.Fatalf("add after restart: %+v, %v", res, err)
	}
	if first.Calls("add") != 1 || second.Calls("add") != 1 {
		t.Errorf("add ran %d times on the first server and %d on the second, want 1 and 1", first.Calls("add"), second.Calls("add"))
	}
}

func TestRegistryClosed(t *testing.T) {
	srv := mcptest.NewHTTP(t)
	r := NewRegistry(Config{Servers: map[string]ServerConfig{"test": httpServer(srv.URL)}}, Options{Logger: slog.New(slog.DiscardHandler)})
	if _, err := r.Call(context.Background(), "test", "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Call(context.Background(), "test", "add", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Call after Close: %v, want ErrClosed", err)
	}
	if st := r.List(context.Background(), []string{"test"}); !errors.Is(st[0].Err, ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", st[0].Err)
	}
}

// hangingServer never answers a request, like a server wedged in its
// handshake. Notifications (such as the client's notifications/cancelled)
// are accepted, as a live HTTP server would.
func hangingServer(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); hs.Close() })
	return hs.URL + "/mcp"
}

func TestRegistryConnectTimeout(t *testing.T) {
	r := newTestRegistry(t, map[string]ServerConfig{"wedged": httpServer(hangingServer(t))}, Options{ConnectTimeout: 300 * time.Millisecond})
	start := time.Now()
	st := r.List(context.Background(), []string{"wedged"})
	if st[0].Err == nil {
		t.Fatal("List of a wedged server: no error")
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("List took %s with a 300ms connect timeout", elapsed)
	}
	if errors.Is(st[0].Err, context.DeadlineExceeded) {
		t.Errorf("a connect timeout must not read as the caller's deadline: %v", st[0].Err)
	}
}

func TestRegistryCloseAbortsConnect(t *testing.T) {
	r := NewRegistry(Config{Servers: map[string]ServerConfig{"wedged": httpServer(hangingServer(t))}},
		Options{ConnectTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	callErr := make(chan error, 1)
	go func() {
		_, err := r.Call(context.Background(), "wedged", "add", nil)
		callErr <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the connect start
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Close waited %s for a connect with a 1m timeout", elapsed)
	}
	select {
	case err := <-callErr:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("the waiting Call got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the waiting Call did not return after Close")
	}
}
