package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/toolrunner/mcp/mcptest"
)

// TestRedirectOffServerRefused: an MCP server that answers 307 to another
// address (a real MCP server there, so following it would work) does not
// get the toolrunner's JSON-RPC sent anywhere: the elsewhere server sees no
// request and the listing fails saying why.
func TestRedirectOffServerRefused(t *testing.T) {
	var elsewhere atomic.Int32
	target := mcptest.New()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		target.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	for name, to := range map[string]string{
		"another origin":    ts.URL + "/mcp",
		"another path":      "/admin",
		"a look-alike path": "/mcpevil",
		"a dot-dot path":    "/mcp/%2e%2e/admin",
	} {
		t.Run(name, func(t *testing.T) {
			allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/mcp" {
					elsewhere.Add(1) // the same origin, off the path
				}
				http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			}))
			t.Cleanup(allowed.Close)
			r := newTestRegistry(t, map[string]ServerConfig{"allowed": httpServer(allowed.URL + "/mcp")}, Options{ConnectTimeout: 3 * time.Second})
			st := r.List(context.Background(), []string{"allowed"})
			if st[0].Err == nil || !strings.Contains(st[0].Err.Error(), "redirect") {
				t.Fatalf("List through a redirect to %s: err %v, want a refused redirect", to, st[0].Err)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Fatalf("the redirect was followed: %d request(s) off the allowed origin and path", n)
			}
		})
	}
}

// TestRedirectUnderServerFollowed: a redirect to a path under the
// server's own (/mcp to /mcp/) is followed.
func TestRedirectUnderServerFollowed(t *testing.T) {
	srv := mcptest.New()
	mux := http.NewServeMux()
	mux.Handle("/mcp/", srv.Handler())
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp/", http.StatusTemporaryRedirect)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	r := newTestRegistry(t, map[string]ServerConfig{"s": httpServer(hs.URL + "/mcp")}, Options{ConnectTimeout: 3 * time.Second})
	if st := r.List(context.Background(), []string{"s"}); st[0].Err != nil {
		t.Fatalf("List through a redirect under the server's path: %v", st[0].Err)
	}
}

// TestMetadataAddressRefusedAtDial: an MCP server URL on a cloud metadata
// or link-local address, in any form (NAT64, 6to4, IPv4-mapped), is refused
// when dialed, before any packet is sent.
func TestMetadataAddressRefusedAtDial(t *testing.T) {
	for _, u := range []string{
		"http://169.254.169.254/mcp",
		"http://[64:ff9b::a9fe:a9fe]/mcp",
		"http://[2002:a9fe:a9fe::1]/mcp",
		"http://[::ffff:169.254.169.254]/mcp",
		"http://[fe80::1]:8080/mcp",
	} {
		r := newTestRegistry(t, map[string]ServerConfig{"m": httpServer(u)}, Options{ConnectTimeout: 5 * time.Second})
		st := r.List(context.Background(), []string{"m"})
		if st[0].Err == nil || !strings.Contains(st[0].Err.Error(), "address refused") {
			t.Errorf("%s: err %v, want the address refused", u, st[0].Err)
		}
	}
}
