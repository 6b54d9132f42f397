package hostguard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	g := New("127.0.0.1:8080", "aptix.internal:9000", "0.0.0.0:8080", "")
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LOCALHOST:1": true, "localhost.": true,
		"127.0.0.1": true, "127.0.0.1:8080": true, "127.1.2.3:80": true,
		"[::1]": true, "[::1]:8080": true, "::1": true, "[::ffff:127.0.0.1]:8080": true,
		"aptix.internal": true, "aptix.internal:1234": true,
		"evil.example": false, "evil.example:8080": false, "localhost.evil.example": false,
		"127.0.0.1.evil.example": false, "0.0.0.0:8080": false, "2130706433": false, "": false,
		"10.0.0.1": false, "[fe80::1]:8080": false,
	} {
		if got := g.Allows(host); got != want {
			t.Errorf("Allows(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvAllowedHosts, " dev.box , other.local:8080")
	g := FromEnv("localhost:8080")
	if !g.Allows("dev.box:8080") || !g.Allows("other.local") || g.Allows("third.local") {
		t.Fatal("APTIX_ALLOWED_HOSTS not applied")
	}
}

// TestWrapRefusesOtherHostsOnLoopback: through a loopback listener a
// request under a rebound name is 421 with the reason; loopback names pass.
func TestWrapRefusesOtherHostsOnLoopback(t *testing.T) {
	hs := httptest.NewServer(New().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })))
	defer hs.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for host, want := range map[string]int{"evil.example:" + port: 421, "localhost:" + port: 200, "127.0.0.1:" + port: 200} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/x", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
