package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Setup is the gateway's authentication as configured by the environment.
type Setup struct {
	// Auth is nil in mode none.
	Auth Authenticator
	Mode Mode
	// Explicit: APTIX_AUTH was set (none on a non-loopback address needs it).
	Explicit        bool
	LimitRPM        int
	LimitBackground int
}

// Describe is a one-line summary for a banner or log.
func (s Setup) Describe() string {
	d := s.Mode.String()
	if s.Mode.None() {
		d = "none (every caller is anonymous and sees every response)"
		if !s.Explicit {
			d = "none (loopback only; set APTIX_AUTH=keys or jwt to require credentials)"
		}
	}
	if s.LimitRPM > 0 {
		d += fmt.Sprintf("; %d requests/min per caller", s.LimitRPM)
	}
	if s.LimitBackground > 0 {
		d += fmt.Sprintf("; %d background responses per caller", s.LimitBackground)
	}
	return d
}

// Loopback reports whether a listen address (host:port) accepts only
// local connections: 127.0.0.0/8, ::1 or localhost. An empty host (":8080")
// listens everywhere.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// FromEnv reads APTIX_AUTH (none | keys | jwt | keys,jwt), the JWT settings
// (APTIX_JWKS_URL, APTIX_JWT_ISSUER, APTIX_JWT_AUDIENCE,
// APTIX_JWT_PRINCIPAL_CLAIM, APTIX_JWT_ROLES_CLAIM, APTIX_JWT_LEEWAY) and the limits
// (APTIX_LIMIT_RPM, APTIX_LIMIT_BACKGROUND). Unset APTIX_AUTH means none
// on a loopback listen address and is an error on any other: a gateway
// reachable from the network serves anonymous callers only when told
// APTIX_AUTH=none explicitly. js opens the key bucket (mode keys); ctx
// bounds the JWKS refreshes (mode jwt).
func FromEnv(ctx context.Context, listen string, js jetstream.JetStream, replicas int, log *slog.Logger) (Setup, error) {
	var s Setup
	raw, explicit := os.LookupEnv("APTIX_AUTH")
	s.Explicit = explicit && raw != ""
	var err error
	if s.Mode, err = ParseMode(raw); err != nil {
		return s, ConfigError{err}
	}
	for _, l := range []struct {
		name string
		v    *int
	}{{"APTIX_LIMIT_RPM", &s.LimitRPM}, {"APTIX_LIMIT_BACKGROUND", &s.LimitBackground}} {
		if v := os.Getenv(l.name); v != "" {
			if *l.v, err = strconv.Atoi(v); err != nil || *l.v < 0 {
				return s, ConfigError{fmt.Errorf("%s %q: want a number ≥ 0", l.name, v)}
			}
		}
	}
	if err := Precheck(listen); err != nil {
		return s, err
	}
	if s.Mode.None() {
		if !Loopback(listen) {
			log.Warn("APTIX_AUTH=none on a non-loopback address: anyone who reaches it can read and cancel every response", "addr", listen)
		}
		return s, nil
	}
	c := &Chain{}
	if s.Mode.Keys {
		keys, err := OpenKeys(ctx, js, replicas)
		if err != nil {
			return s, err
		}
		c.Keys = keys
	}
	if s.Mode.JWT {
		cfg := JWTConfig{
			JWKSURL: os.Getenv("APTIX_JWKS_URL"), Issuer: os.Getenv("APTIX_JWT_ISSUER"),
			Audience: os.Getenv("APTIX_JWT_AUDIENCE"), PrincipalClaim: os.Getenv("APTIX_JWT_PRINCIPAL_CLAIM"),
			RolesClaim: os.Getenv("APTIX_JWT_ROLES_CLAIM"), Logger: log,
		}
		if cfg.Budgets, err = BudgetsFromFlags(os.Getenv("APTIX_JWT_BUDGET"), os.Getenv("APTIX_JWT_BUDGET_TOKENS")); err != nil {
			return s, ConfigError{fmt.Errorf("APTIX_JWT_BUDGET: %w", err)}
		}
		if v := os.Getenv("APTIX_JWT_LEEWAY"); v != "" {
			if cfg.Leeway, err = time.ParseDuration(v); err != nil {
				return s, ConfigError{fmt.Errorf("APTIX_JWT_LEEWAY %q: %w", v, err)}
			}
		}
		j, err := NewJWT(ctx, cfg)
		if err != nil {
			return s, ConfigError{err}
		}
		c.JWT = j
	}
	s.Auth = c
	return s, nil
}

// Precheck applies the loopback rule alone (no I/O), so a command can
// refuse a bad configuration before it starts anything: an unset
// APTIX_AUTH on an address beyond loopback is an error.
func Precheck(listen string) error {
	raw, explicit := os.LookupEnv("APTIX_AUTH")
	m, err := ParseMode(raw)
	if err != nil {
		return ConfigError{err}
	}
	if m.None() && !(explicit && raw != "") && !Loopback(listen) {
		return ConfigError{fmt.Errorf("the gateway listens on %s, beyond loopback, and APTIX_AUTH is not set: "+
			"set APTIX_AUTH=keys (aptix keys create), jwt (APTIX_JWKS_URL…) or keys,jwt; "+
			"or APTIX_AUTH=none to serve anyone without credentials", listen)}
	}
	return nil
}

// ConfigError is a configuration mistake: retrying does not help.
type ConfigError struct{ error }

func (e ConfigError) Unwrap() error { return e.error }
