package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestKeyBudgets: a key's budgets are kept with it and come back with its
// principal on every request.
func TestKeyBudgets(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	keys, err := OpenKeys(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := BudgetsFromFlags("0.10/day", "100000/month")
	if err != nil {
		t.Fatal(err)
	}
	want := []contracts.Budget{{USD: 0.10, Period: "day"}, {Tokens: 100000, Period: "month"}}
	if !slices.Equal(budgets, want) {
		t.Fatalf("parsed %+v", budgets)
	}
	key, _, err := keys.CreateKey(ctx, KeyRecord{Name: "capped", Budgets: budgets}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := keys.Verify(ctx, key); err != nil || !slices.Equal(p.Budgets, want) {
		t.Fatalf("verified %+v %v", p, err)
	}
	for _, bad := range [][2]string{{"10", ""}, {"", "0.5/day"}, {"1/year", ""}} {
		if _, err := BudgetsFromFlags(bad[0], bad[1]); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestJWTBudget: APTIX_JWT_BUDGET gives every token's principal the budget.
func TestJWTBudget(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "OKP", "kid": "k1", "alg": "EdDSA", "use": "sig", "crv": "Ed25519",
			"x": base64.RawURLEncoding.EncodeToString(pub)}}})
	}))
	defer idp.Close()
	t.Setenv("APTIX_AUTH", "jwt")
	t.Setenv("APTIX_JWKS_URL", idp.URL)
	t.Setenv("APTIX_JWT_ISSUER", "https://idp.test")
	t.Setenv("APTIX_JWT_AUDIENCE", "aptix")
	t.Setenv("APTIX_JWT_BUDGET", "5/month")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := FromEnv(ctx, "127.0.0.1:0", nil, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"sub": "bob", "iss": "https://idp.test", "aud": "aptix", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	signed, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/models", nil)
	r.Header.Set("Authorization", "Bearer "+signed)
	p, f := s.Auth.Authenticate(r)
	if f != nil || !slices.Equal(p.Budgets, []contracts.Budget{{USD: 5, Period: "month"}}) {
		t.Fatalf("principal %+v, failure %v", p, f)
	}
	t.Setenv("APTIX_JWT_BUDGET", "5")
	if _, err := FromEnv(ctx, "127.0.0.1:0", nil, 1, quiet); err == nil {
		t.Fatal("a malformed APTIX_JWT_BUDGET was accepted")
	}
}
