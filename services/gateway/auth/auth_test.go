package auth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestFromEnvLoopback: without APTIX_AUTH a gateway on loopback runs with
// no authentication, and one listening beyond loopback refuses to start
// unless APTIX_AUTH=none is explicit.
func TestFromEnvLoopback(t *testing.T) {
	for _, c := range []struct {
		env, listen string
		ok          bool
	}{
		{"", "127.0.0.1:8080", true},
		{"", "[::1]:8080", true},
		{"", "localhost:8080", true},
		{"", ":8080", false},
		{"", "0.0.0.0:8080", false},
		{"", "10.0.0.5:8080", false},
		{"none", ":8080", true},
		{"bogus", "127.0.0.1:8080", false},
	} {
		t.Run(c.env+"@"+c.listen, func(t *testing.T) {
			if c.env == "" {
				t.Setenv("APTIX_AUTH", "")
			} else {
				t.Setenv("APTIX_AUTH", c.env)
			}
			s, err := FromEnv(context.Background(), c.listen, nil, 1, quiet)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok=%v", err, c.ok)
			}
			var ce ConfigError
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("a configuration error is not retried: %T", err)
			}
			if err == nil && (s.Auth != nil || !s.Mode.None()) {
				t.Fatalf("mode %s", s.Mode)
			}
		})
	}
	t.Setenv("APTIX_AUTH", "jwt")
	if _, err := FromEnv(context.Background(), ":8080", nil, 1, quiet); err == nil {
		t.Fatal("jwt without APTIX_JWKS_URL/ISSUER/AUDIENCE must not start")
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"": "none", "none": "none", "keys": "keys", "jwt": "jwt", "keys,jwt": "keys,jwt", "jwt, keys": "keys,jwt"} {
		if m, err := ParseMode(in); err != nil || m.String() != want {
			t.Errorf("ParseMode(%q) = %s, %v", in, m, err)
		}
	}
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "12h": 12 * time.Hour, "": 0} {
		if d, err := ParseTTL(in); err != nil || d != want {
			t.Errorf("ParseTTL(%q) = %s, %v", in, d, err)
		}
	}
	for _, bad := range []string{"-1d", "xd", "soon"} {
		if _, err := ParseTTL(bad); err == nil {
			t.Errorf("ParseTTL(%q) accepted", bad)
		}
	}
}
