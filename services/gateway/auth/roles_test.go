package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestKeyRoles: a key created with the admin role verifies as a principal
// holding it; an ordinary key holds none (the console refuses it).
func TestKeyRoles(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	keys, err := OpenKeys(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	admin, rec, err := keys.CreateWithRoles(ctx, "ops", "", 0, []string{RoleAdmin})
	if err != nil || !slices.Equal(rec.Roles, []string{RoleAdmin}) {
		t.Fatalf("create: %v %+v", err, rec)
	}
	plain, _, err := keys.Create(ctx, "app", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := keys.Verify(ctx, admin); err != nil || !p.Has(RoleAdmin) || p.ID != "key:ops" {
		t.Fatalf("admin key: %+v %v", p, err)
	}
	if p, err := keys.Verify(ctx, plain); err != nil || p.Has(RoleAdmin) {
		t.Fatalf("ordinary key: %+v %v", p, err)
	}
}

// TestJWTRoles: the roles claim (an array, or a space-separated string, or
// another claim named by RolesClaim) becomes the principal's roles.
func TestJWTRoles(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "OKP", "kid": "k1", "alg": "EdDSA", "use": "sig", "crv": "Ed25519",
			"x": base64.RawURLEncoding.EncodeToString(pub)}}})
	}))
	defer idp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sign := func(extra jwt.MapClaims) string {
		now := time.Now()
		c := jwt.MapClaims{"sub": "alice", "iss": "https://idp.test", "aud": "aptix", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		claim string
		extra jwt.MapClaims
		admin bool
	}{
		{"", jwt.MapClaims{"roles": []string{"reader", "admin"}}, true},
		{"", jwt.MapClaims{"roles": "reader admin"}, true},
		{"", jwt.MapClaims{"roles": []string{"reader"}}, false},
		{"", nil, false},
		{"groups", jwt.MapClaims{"groups": []string{"admin"}, "roles": []string{}}, true},
		{"groups", jwt.MapClaims{"roles": []string{"admin"}}, false},
	} {
		v, err := NewJWT(ctx, JWTConfig{JWKSURL: idp.URL, Issuer: "https://idp.test", Audience: "aptix", RolesClaim: c.claim, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		p, err := v.Verify(ctx, sign(c.extra))
		if err != nil || p.Has(RoleAdmin) != c.admin {
			t.Errorf("claim %q %v: %+v %v, want admin %v", c.claim, c.extra, p, err, c.admin)
		}
	}
}

// TestKeyNamesAreUnique: a second active key of a name is refused at
// creation (it was accepted, and `keys revoke NAME` then revoked both);
// once the first is revoked the name is free again.
func TestKeyNamesAreUnique(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	keys, err := OpenKeys(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Create(ctx, "ci", "", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.Create(ctx, "ci", "", 0); !errors.Is(err, ErrDuplicateName) {
		t.Fatalf("second key named ci: %v", err)
	}
	if done, err := keys.Revoke(ctx, "ci"); err != nil || len(done) != 1 {
		t.Fatalf("revoke: %v %d", err, len(done))
	}
	if _, _, err := keys.Create(ctx, "ci", "", 0); err != nil {
		t.Fatalf("the name of a revoked key: %v", err)
	}
}
