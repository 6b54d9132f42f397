// Package hostguard refuses requests that reached a loopback listener under
// a host name that is not the server's: DNS rebinding. A web page the user
// visits can point its own name at 127.0.0.1 and then read a local server
// that asks for no credentials as if it were the page's own origin; the
// browser still sends the page's name as Host, which is how the server
// tells. One rule for every local HTTP endpoint of Aptix (the API, the
// console, MCP): loopback names (localhost, 127.0.0.0/8, ::1), the
// server's listen address, and the names a deployment adds
// (APTIX_ALLOWED_HOSTS); the port is not compared.
package hostguard

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// EnvAllowedHosts lists more host names (or host:port) a loopback server
// answers to, comma separated: a name in /etc/hosts, a proxy's.
const EnvAllowedHosts = "APTIX_ALLOWED_HOSTS"

// CodeHostNotAllowed is the error code of a refused request.
const CodeHostNotAllowed = "host_not_allowed"

// Guard holds the host names a loopback server answers to besides
// loopback's own.
type Guard struct {
	allowed map[string]bool
}

// New allows loopback names and each of extra: a host, host:port or
// [v6]:port (a listen address, an APTIX_ALLOWED_HOSTS entry). An empty
// entry or an unspecified address (0.0.0.0, ::) adds nothing: neither is a
// name a browser sends for a page of its own.
func New(extra ...string) *Guard {
	g := &Guard{allowed: map[string]bool{}}
	for _, e := range extra {
		h := hostOf(e)
		if ip, err := netip.ParseAddr(h); h == "" || err == nil && ip.IsUnspecified() {
			continue
		}
		g.allowed[h] = true
	}
	return g
}

// FromEnv is New with the listen addresses and EnvAllowedHosts.
func FromEnv(listen ...string) *Guard {
	return New(append(listen, strings.Split(os.Getenv(EnvAllowedHosts), ",")...)...)
}

// hostOf is the host name of a Host header or address, lower case, without
// port, brackets or a trailing dot.
func hostOf(hostport string) string {
	h := strings.TrimSpace(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// Allows reports whether a request with this Host header is for this
// server.
func (g *Guard) Allows(host string) bool {
	h := hostOf(host)
	if h == "localhost" || g.allowed[h] {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// Wrap refuses with 421 Misdirected Request a request that arrived on a
// loopback address under a host name Allows refuses; a request that
// arrived on another address is let through (whoever can reach it there
// needs no rebinding).
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onLoopback(r) && !g.Allows(r.Host) {
			refuse(w, r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// onLoopback reports whether r came in on a loopback address (true when
// the server does not say: refusing is the safe side).
func onLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err != nil || ap.Addr().Unmap().IsLoopback()
}

func refuse(w http.ResponseWriter, host string) {
	msg := fmt.Sprintf("Host %q is not a name of this server: a local Aptix without authentication answers only to localhost, "+
		"127.0.0.1, [::1] and its listen address (DNS rebinding protection); add the name to %s to allow it.", cut(host), EnvAllowedHosts)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": CodeHostNotAllowed}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusMisdirectedRequest)
	_, _ = w.Write(append(body, '\n'))
}

// cut bounds a client's host name in the message.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
