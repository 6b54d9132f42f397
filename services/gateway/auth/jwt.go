package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Algorithms are the only JWT signature algorithms accepted: never none,
// never HMAC (a public key used as an HMAC secret is the classic forgery).
var Algorithms = []string{"RS256", "ES256", "EdDSA"}

// JWTConfig configures token validation.
type JWTConfig struct {
	JWKSURL  string
	Issuer   string
	Audience string
	// PrincipalClaim names the claim that identifies the caller (default sub).
	PrincipalClaim string
	// RolesClaim names the claim that lists the caller's roles (default
	// roles): an array of strings or one space-separated string, as
	// identity providers write it; "admin" opens the console.
	RolesClaim string
	// Leeway allowed on exp, nbf and iat (default 30s).
	Leeway time.Duration
	// RefreshInterval re-reads the JWKS in the background (default 1h).
	RefreshInterval time.Duration
	// UnknownKIDEvery bounds the refreshes an unknown kid triggers (default
	// one per minute): a rotated key is found at once, and a stream of
	// forged kids cannot hammer the JWKS.
	UnknownKIDEvery time.Duration
	Client          *http.Client
	Logger          *slog.Logger
	// Budgets apply to every token's principal, each on its own
	// (APTIX_JWT_BUDGET, APTIX_JWT_BUDGET_TOKENS).
	Budgets []contracts.Budget
}

// JWT validates bearer tokens against a JWKS (MicahParks/keyfunc with
// golang-jwt: no hand-written crypto).
type JWT struct {
	kf      keyfunc.Keyfunc
	parser  *jwt.Parser
	claim   string
	roles   string
	budgets []contracts.Budget
}

// NewJWT fetches the JWKS (a failure is logged and retried on use, so a
// gateway may start before its identity provider) and keeps it refreshed
// until ctx ends. Issuer and audience are required.
func NewJWT(ctx context.Context, cfg JWTConfig) (*JWT, error) {
	if cfg.JWKSURL == "" || cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("jwt: APTIX_JWKS_URL, APTIX_JWT_ISSUER and APTIX_JWT_AUDIENCE are all required")
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = "roles"
	}
	if cfg.Leeway <= 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.UnknownKIDEvery <= 0 {
		cfg.UnknownKIDEvery = time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client:           cfg.Client,
		HTTPTimeout:      5 * time.Second,
		RefreshInterval:  cfg.RefreshInterval,
		RateLimitWaitMax: time.Second,
		// One refresh for an unknown kid, then at most one per UnknownKIDEvery.
		RefreshUnknownKID: rate.NewLimiter(rate.Every(cfg.UnknownKIDEvery), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) { log.Warn("JWKS refresh failed", "url", u, "err", err) }
		},
	})
	if err != nil {
		return nil, fmt.Errorf("jwt: JWKS %s: %w", cfg.JWKSURL, err)
	}
	return &JWT{
		kf: kf,
		parser: jwt.NewParser(
			jwt.WithValidMethods(Algorithms),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
		),
		claim: cfg.PrincipalClaim,
		roles: cfg.RolesClaim, budgets: cfg.Budgets,
	}, nil
}

// Verify checks the token's signature, algorithm, issuer, audience and
// times, and returns the principal jwt:<claim>. The error names the check
// that failed (golang-jwt's message), for the log.
func (j *JWT) Verify(ctx context.Context, token string) (Principal, error) {
	claims := jwt.MapClaims{}
	if _, err := j.parser.ParseWithClaims(token, claims, j.kf.KeyfuncCtx(ctx)); err != nil {
		return Principal{}, err
	}
	sub, _ := claims[j.claim].(string)
	if sub == "" {
		return Principal{}, fmt.Errorf("token has no %q claim", j.claim)
	}
	return Principal{ID: "jwt:" + sub, Via: "jwt", Roles: claimRoles(claims[j.roles]), Budgets: j.budgets}, nil
}

// claimRoles reads a roles claim: ["admin", …] or "admin other".
func claimRoles(v any) []string {
	switch r := v.(type) {
	case string:
		return strings.Fields(r)
	case []any:
		var out []string
		for _, x := range r {
			if s, ok := x.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
