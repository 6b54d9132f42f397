package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUpRefusesRebindingHosts: `aptix up` on loopback without
// authentication answers the API, the console and MCP only under
// loopback names, its listen address and APTIX_ALLOWED_HOSTS; a rebound
// name (a web page's own, pointed at 127.0.0.1) is 421 host_not_allowed.
// Before the check the API and console answered any Host.
func TestUpRefusesRebindingHosts(t *testing.T) {
	startUpEnv(t, t.TempDir(), map[string]string{"APTIX_AUTH": "", "APTIX_ALLOWED_HOSTS": "dev.box"})
	_, port, _ := strings.Cut(upHTTP, ":")
	_, mcpPort, _ := strings.Cut(upMCP, ":")
	get := func(addr, path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/models", "/console/"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port} {
			if st, body := get(upHTTP, path, host); st != http.StatusMisdirectedRequest || !strings.Contains(body, "host_not_allowed") || !strings.Contains(body, "APTIX_ALLOWED_HOSTS") {
				t.Errorf("%s with Host %s: %d %s", path, host, st, body)
			}
		}
		for _, host := range []string{"localhost:" + port, "localhost", "127.0.0.1:" + port, "127.0.0.1", "dev.box:" + port} {
			if st, body := get(upHTTP, path, host); st == http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %s refused: %s", path, host, body)
			}
		}
	}
	if upMCP != "" {
		if st, body := get(upMCP, "/mcp", "evil.example:"+mcpPort); st != http.StatusMisdirectedRequest {
			t.Errorf("MCP with a rebound Host: %d %s", st, body)
		}
		if st, body := get(upMCP, "/mcp", "dev.box:"+mcpPort); st == http.StatusMisdirectedRequest || st == http.StatusForbidden {
			t.Errorf("MCP with an allowed Host: %d %s", st, body)
		}
	}
}
