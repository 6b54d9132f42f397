// Package auth says who is calling the gateway: an API key (kept hashed in
// the JetStream KV bucket aptix_keys) or a JWT checked against a JWKS. It is
// plain Go behind one interface, Authenticator; the HTTP middleware is in
// httpapi. Nothing here logs or returns key material: a failure carries a
// reason for the operator's log, never the credential.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Principal is an authenticated caller. ID owns the responses it creates
// ("key:<name>" for an API key, "jwt:<sub>" for a token, "" when the
// gateway runs without authentication).
type Principal struct {
	ID string
	// Via is "key", "jwt" or "none".
	Via string
	// Roles are what the credential may do beyond the API: RoleAdmin opens
	// the web console (docs/security.md). A key gets them at creation
	// (aptix keys create --admin); a JWT from its roles claim.
	Roles []string
	// Budgets cap what the principal may spend (its key's, or the JWT
	// mapping's); the gateway copies them into every turn it submits.
	Budgets []contracts.Budget
	// KeyID is the public id of the API key used (empty for a JWT).
	KeyID string
}

// RoleAdmin is the role the web console requires when authentication is on.
const RoleAdmin = "admin"

// Has reports whether p holds role.
func (p Principal) Has(role string) bool {
	for _, r := range p.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Failure is a refused credential: Code is the client's error code
// (invalid_api_key or invalid_token); Reason is for the log only (which
// check failed), never sent to the client and never containing the
// credential.
type Failure struct {
	Code   string
	Reason string
	// Missing: no credential was sent at all.
	Missing bool
}

func (f *Failure) Error() string { return f.Code + ": " + f.Reason }

// Client error codes.
const (
	CodeInvalidKey   = "invalid_api_key"
	CodeInvalidToken = "invalid_token"
)

// Authenticator turns a request into a principal or a failure.
type Authenticator interface {
	Authenticate(r *http.Request) (Principal, *Failure)
	// Mode is the configured mode, for banners and logs ("keys", "jwt", "keys,jwt").
	Mode() string
}

// Mode is the set of accepted credential kinds; neither is "none".
type Mode struct{ Keys, JWT bool }

// ParseMode reads APTIX_AUTH: none, keys, jwt, or keys,jwt (either order).
func ParseMode(s string) (Mode, error) {
	var m Mode
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "none" {
		return m, nil
	}
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "keys", "key":
			m.Keys = true
		case "jwt":
			m.JWT = true
		default:
			return m, fmt.Errorf("APTIX_AUTH %q: want none, keys, jwt or keys,jwt", s)
		}
	}
	return m, nil
}

// None reports whether m accepts every caller.
func (m Mode) None() bool { return !m.Keys && !m.JWT }

func (m Mode) String() string {
	switch {
	case m.Keys && m.JWT:
		return "keys,jwt"
	case m.Keys:
		return "keys"
	case m.JWT:
		return "jwt"
	}
	return "none"
}

// KeyVerifier checks an API key (Keys).
type KeyVerifier interface {
	Verify(ctx context.Context, key string) (Principal, error)
}

// TokenVerifier checks a bearer token (JWT).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (Principal, error)
}

// Chain accepts the credential kinds of its mode: an API key in X-API-Key or
// as a bearer token starting with sk-aptix-, a JWT as any other bearer
// token.
type Chain struct {
	Keys KeyVerifier   // nil: keys are not accepted
	JWT  TokenVerifier // nil: tokens are not accepted
}

// Mode is the mode the chain implements.
func (c *Chain) Mode() string { return Mode{Keys: c.Keys != nil, JWT: c.JWT != nil}.String() }

// Authenticate reads the credential of r.
func (c *Chain) Authenticate(r *http.Request) (Principal, *Failure) {
	code := CodeInvalidToken
	if c.Keys != nil {
		code = CodeInvalidKey
	}
	var cred string
	if v := r.Header.Get("X-API-Key"); v != "" {
		cred = strings.TrimSpace(v)
		if c.Keys == nil {
			return Principal{}, &Failure{Code: code, Reason: "X-API-Key sent but API keys are not accepted"}
		}
		return c.key(r.Context(), cred)
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, &Failure{Code: code, Reason: "no credentials", Missing: true}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return Principal{}, &Failure{Code: code, Reason: "Authorization is not a bearer credential"}
	}
	tok = strings.TrimSpace(tok)
	if strings.HasPrefix(tok, KeyPrefix) {
		if c.Keys == nil {
			return Principal{}, &Failure{Code: code, Reason: "an API key was sent but API keys are not accepted"}
		}
		return c.key(r.Context(), tok)
	}
	if c.JWT == nil {
		return Principal{}, &Failure{Code: code, Reason: "bearer credential is not an Aptix API key"}
	}
	p, err := c.JWT.Verify(r.Context(), tok)
	if err != nil {
		return Principal{}, &Failure{Code: CodeInvalidToken, Reason: err.Error()}
	}
	return p, nil
}

func (c *Chain) key(ctx context.Context, key string) (Principal, *Failure) {
	p, err := c.Keys.Verify(ctx, key)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return Principal{}, &Failure{Code: "unavailable", Reason: err.Error()}
		}
		return Principal{}, &Failure{Code: CodeInvalidKey, Reason: err.Error()}
	}
	return p, nil
}

// ErrUnavailable: the key store could not be read (a 503, not a 401).
var ErrUnavailable = errors.New("key store unavailable")

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the principal ctx carries (the zero Principal when none).
func From(ctx context.Context) Principal {
	p, _ := ctx.Value(ctxKey{}).(Principal)
	return p
}
