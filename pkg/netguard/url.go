package netguard

import (
	"net"
	"net/url"
	"strings"
)

// Within reports whether u is at or under base: the same scheme and host
// (a default port spelled or not), no userinfo, and base's path a prefix of
// u's path segment by segment ("/mcp" admits "/mcp" and "/mcp/x", not
// "/mcpevil"). A path servers may read differently from Aptix is never
// within: dot segments ("/mcp/../admin", also percent-encoded), encoded
// slashes or backslashes, and backslashes.
func Within(u, base *url.URL) bool {
	if u == nil || base == nil || u.User != nil || u.Opaque != "" || base.Opaque != "" {
		return false
	}
	if !strings.EqualFold(u.Scheme, base.Scheme) || hostPort(u) != hostPort(base) || u.Host == "" {
		return false
	}
	us, ok := PathSegments(u)
	if !ok {
		return false
	}
	bs, ok := PathSegments(base)
	if !ok || len(bs) > len(us) {
		return false
	}
	for i := range bs {
		if us[i] != bs[i] {
			return false
		}
	}
	return true
}

// PathSegments splits a URL's unescaped path; ok is false for a path with dot
// segments, backslashes or an encoded slash. Empty segments (a trailing or
// doubled slash) are dropped.
func PathSegments(u *url.URL) ([]string, bool) {
	raw := strings.ToLower(u.EscapedPath())
	if strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") || strings.Contains(u.Path, `\`) {
		return nil, false
	}
	var out []string
	for _, s := range strings.Split(u.Path, "/") {
		switch s {
		case "":
		case ".", "..":
			return nil, false
		default:
			out = append(out, s)
		}
	}
	return out, true
}

// hostPort is u's lower-cased host with its scheme's default port made
// explicit.
func hostPort(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}
