package stack

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// slowBody sends a request's headers and the start of its body, then
// nothing, and returns the status the gateway answered and how long after
// the headers the connection was closed (a failure when it is still open
// after wait).
func slowBody(t *testing.T, url, head string, wait time.Duration) (status string, closedAfter time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head+`{"model":"sand`); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(start.Add(wait))
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer within %s: %v", wait, err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("%s: the connection is still open after %s: %v", strings.TrimSpace(line), wait, err)
	}
	return strings.TrimSpace(line), time.Since(start)
}

// TestGatewaySlowBodyTimesOut: a body that does not arrive within
// BodyTimeout ends its request with 408 and its connection, whether or not
// the caller is authenticated (the deadline is set before authentication);
// 1,000 slow-body connections once stayed open for a minute. Responses that
// outlive the timeout (an SSE stream, a WebSocket) are not cut by it.
func TestGatewaySlowBodyTimesOut(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 600 * time.Millisecond})
	const timeout = 300 * time.Millisecond
	bodyTimeout := func(c *httpapi.Config) { c.BodyTimeout = timeout }
	url, _ := e.gateway(bodyTimeout)
	for _, head := range []string{
		"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
		"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n",
		"POST /v1/aptix/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
	} {
		st, after := slowBody(t, url, head, 5*time.Second)
		if !strings.Contains(st, " 408 ") || after < timeout || after > timeout+3*time.Second {
			t.Fatalf("slow body: %q, closed after %s", st, after)
		}
	}

	keys, err := auth.OpenKeys(ctxT(t), e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	authURL := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, bodyTimeout)
	st, after := slowBody(t, authURL, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", 5*time.Second)
	if !strings.Contains(st, " 401 ") || after > timeout+3*time.Second {
		t.Fatalf("unauthenticated slow body: %q, closed after %s", st, after)
	}

	// A stream that lasts longer than the body timeout is whole.
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(`{"model":"sandbox-1","input":"slow stream","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := sseEvents(t, resp.Body)
	resp.Body.Close()
	if len(evs) == 0 || evs[len(evs)-1]["type"] != "response.completed" {
		t.Fatalf("stream past the body timeout: %v", evs)
	}
	// So is a synchronous create, and a WebSocket idle past it.
	if st, _, body := call(t, "POST", url+"/v1/responses", `{"model":"sandbox-1","input":"slow sync"}`, nil); st != 200 {
		t.Fatalf("sync create past the body timeout: %d %s", st, body)
	}
	c := wsDial(t, url)
	time.Sleep(2 * timeout)
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "idle socket"}))
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "again"}))
}

// TestGatewayContentType: a JSON endpoint reads only a JSON body:
// text/plain, a form or any other type is refused as OpenAI refuses it (400
// unsupported_content_type) before the body is read; application/json with
// parameters, and a request with no Content-Type, are read as JSON.
func TestGatewayContentType(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	body := `{"model":"sandbox-1","input":"typed?"}`
	send := func(path, ct, body string) (int, string) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/responses", "/v1/responses/compact", "/v1/aptix/execute"} {
		for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "json"} {
			st, got := send(path, ct, body)
			if param, code := errorOf(t, got); st != 400 || code != "unsupported_content_type" || param != "" || !strings.Contains(got, "only accepts 'application/json'") {
				t.Fatalf("%s as %q: %d %s", path, ct, st, got)
			}
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", ""} {
		if st, got := send("/v1/responses", ct, body); st != 200 {
			t.Fatalf("%q: %d %s", ct, st, got)
		}
	}
	if st, got := send("/v1/aptix/execute", "application/json", `{"instruction":"typed?"}`); st != 200 {
		t.Fatalf("execute: %d %s", st, got)
	}
}

// TestGatewayCloseEndsWaitsAndSockets: a gateway that closes (the process
// stops, or its NATS connection was lost and a new gateway takes over)
// answers a synchronous create still waiting with a 503 at once, not after
// the sync timeout, and closes its WebSockets with 1012 (service restart).
func TestGatewayCloseEndsWaitsAndSockets(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 3 * time.Second})
	srv, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.SyncTimeout = time.Minute })
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c := wsDial(t, hs.URL)
	got := make(chan int, 1)
	go func() {
		st, _, _ := call(t, "POST", hs.URL+"/v1/responses", `{"model":"sandbox-1","input":"slow"}`, nil)
		got <- st
	}()
	time.Sleep(500 * time.Millisecond) // the create is waiting for its turn
	start := time.Now()
	srv.Close()
	select {
	case st := <-got:
		if st != http.StatusServiceUnavailable {
			t.Fatalf("a create waiting when the gateway closed: %d, want 503", st)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a create waiting when the gateway closed was not answered within 2s")
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := c.Read(rctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
		t.Fatalf("socket after the gateway closed: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closing took %s", d)
	}
}
