package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestUpSurvivesLostConnection: NATS closes a connection that sends a
// protocol line over its limit, and nats.go then closes it for good. That
// took `aptix up` down: every stage and the gateway shared the connection,
// and the process exited within a second. Now `up` connects again and
// rebuilds everything on the new connection: a turn over the bus and a
// response over HTTP both complete afterwards, and an overlong response id
// sent to the gateway does not reach the connection at all.
func TestUpSurvivesLostConnection(t *testing.T) {
	conns := make(chan *nats.Conn, 8)
	upConnected = func(nc *nats.Conn) { conns <- nc }
	t.Cleanup(func() { upConnected = nil })
	startUp(t)
	first := <-conns
	if out, _, err := execTurn(t, execFlags{conversation: "survive"}, "before"); err != nil || !strings.Contains(out, "Sandbox reply") {
		t.Fatalf("turn before: %v %q", err, out)
	}

	// What a hostile id did before the gateway refused it: a subject over
	// the server's max control line on the shared connection.
	_ = first.Publish("aptix.requested.c."+strings.Repeat("x", 5000), nil)
	_ = first.Flush()
	select {
	case nc := <-conns:
		if nc == first || !nc.IsConnected() {
			t.Fatal("no new connection")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("aptix up did not connect again within 20s (first connection %s: %v)", first.Status(), first.LastError())
	}
	if !first.IsClosed() {
		t.Fatalf("the first connection is %s: the test did not close it", first.Status())
	}

	// The gateway is back once /readyz says so.
	base := "http://" + upHTTP
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready again within 20s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, _, err := execTurn(t, execFlags{conversation: "survive"}, "after"); err != nil || !strings.Contains(out, "Sandbox reply") {
		t.Fatalf("turn after the connection was replaced: %v %q", err, out)
	}
	for _, req := range []func() (*http.Response, error){
		func() (*http.Response, error) {
			return http.Get(base + "/v1/responses/resp_" + strings.Repeat("a", 5000))
		},
		func() (*http.Response, error) {
			return http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"sandbox-1","input":"after"}`))
		},
	} {
		resp, err := req()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 && resp.StatusCode != 200 {
			t.Fatalf("gateway after the connection was replaced: %d %s", resp.StatusCode, body)
		}
	}
	select {
	case nc := <-conns:
		t.Fatalf("the hostile id cost another connection (%v)", nc.Status())
	default:
	}
}
