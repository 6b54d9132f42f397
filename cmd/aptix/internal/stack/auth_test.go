package stack

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// logBuf is a slog sink a test greps (key material must never reach it).
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// authGateway serves a gateway with a as its authenticator, logging to logs.
func (e *env) authGateway(a auth.Authenticator, logs *logBuf, mutate ...func(*httpapi.Config)) string {
	e.t.Helper()
	url, _ := e.gateway(append([]func(*httpapi.Config){func(c *httpapi.Config) {
		c.Auth = a
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}}, mutate...)...)
	return url
}

// as is an openai-go client of url sending key as its bearer credential.
func as(url, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// call sends a raw request with the given headers and returns the status,
// response headers and body.
func call(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func bearer(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }

// want401 checks a refusal: 401, OpenAI's error shape with code, a
// WWW-Authenticate challenge, and no hint of which check failed.
func want401(t *testing.T, what string, status int, h http.Header, body, code string) {
	t.Helper()
	var doc struct {
		Error struct{ Message, Type, Code string }
	}
	if status != 401 || json.Unmarshal([]byte(body), &doc) != nil || doc.Error.Code != code || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("%s: got %d %s (WWW-Authenticate %q), want 401 %s", what, status, body, h.Get("WWW-Authenticate"), code)
	}
	for _, leak := range []string{"revoked", "expired", "audience", "issuer", "signature", "kid", "unknown"} {
		if strings.Contains(strings.ToLower(doc.Error.Message), leak) {
			t.Fatalf("%s: the client is told %q", what, doc.Error.Message)
		}
	}
}

// noSecrets fails when any secret appears in the logs, in any message of
// any stream (the turns, deltas, KV buckets: headers and data), so not in
// the stream nor in KV.
func noSecrets(t *testing.T, js jetstream.JetStream, logs string, secrets ...string) {
	t.Helper()
	ctx := ctxT(t)
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Fatalf("a credential is in the logs")
		}
	}
	names := js.StreamNames(ctx)
	n := 0
	for name := range names.Name() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := st.CachedInfo()
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			n++
			raw := string(m.Data) + m.Subject
			for k, v := range m.Header {
				raw += k + strings.Join(v, ",")
			}
			for _, s := range secrets {
				if strings.Contains(raw, s) {
					t.Fatalf("a credential is stored in stream %s (%s)", name, m.Subject)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no stored message read")
	}
}

// TestGatewayAuthKeys: APTIX_AUTH=keys end to end. No credential, a
// malformed key, a wrong secret for a real id → 401; a valid key → 200
// (Bearer and X-API-Key); health stays open; one principal's response is
// 404 for another (GET, input_items, cancel, delete, stream resume) and
// previous_response_id answers as unknown; named conversations are per
// principal; the turn carries the principal; a key revoked through the
// store is refused at once by a second replica; an expired key is refused;
// no key appears in the logs, the streams or KV.
func TestGatewayAuthKeys(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 300 * time.Millisecond}, slowProfile)
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, arec, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := keys.Create(ctx, "bob", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(alice, "sk-aptix-") || len(alice) < 60 || arec.Principal != "key:alice" {
		t.Fatalf("key %d chars, record %+v", len(alice), arec)
	}
	logs := &logBuf{}
	url := e.authGateway(&auth.Chain{Keys: keys}, logs)

	// Refusals.
	st, h, body := call(t, "POST", url+"/v1/responses", `{"model":"sandbox-1","input":"x"}`, nil)
	want401(t, "no credentials", st, h, body, "invalid_api_key")
	st, h, body = call(t, "GET", url+"/v1/models", "", bearer("sk-aptix-garbage"))
	want401(t, "malformed key", st, h, body, "invalid_api_key")
	forged := alice[:len(alice)-4] + "AAAA"
	if forged == alice {
		forged = alice[:len(alice)-4] + "BBBB"
	}
	st, h, body = call(t, "GET", url+"/v1/models", "", bearer(forged))
	want401(t, "right id, wrong secret", st, h, body, "invalid_api_key")
	st, h, body = call(t, "GET", url+"/v1/models", "", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+alice))})
	want401(t, "Basic scheme", st, h, body, "invalid_api_key")
	st, h, body = call(t, "GET", url+"/v1/models", "", bearer("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."))
	want401(t, "a JWT where only keys are accepted", st, h, body, "invalid_api_key")
	if st, _, _ := call(t, "GET", url+"/healthz", "", nil); st != 200 {
		t.Fatalf("healthz without credentials: %d", st)
	}
	if st, _, body := call(t, "GET", url+"/v1/models", "", map[string]string{"X-API-Key": alice}); st != 200 {
		t.Fatalf("X-API-Key: %d %s", st, body)
	}

	// Alice's responses.
	ca, cb := as(url, alice), as(url, bob)
	r, err := ca.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Alice's question")}})
	if err != nil || r.Status != responses.ResponseStatusCompleted {
		t.Fatalf("valid key: %v", err)
	}
	if _, err := ca.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("owner GET: %v", err)
	}
	// The turn on the bus says who asked.
	stream, _ := e.js.Stream(ctx, contracts.StreamName)
	m, err := stream.GetLastMsgForSubject(ctx, "aptix.completed.>")
	if err != nil {
		t.Fatal(err)
	}
	var turn contracts.Turn
	if err := json.Unmarshal(m.Data, &turn); err != nil || turn.Request.Principal != "key:alice" {
		t.Fatalf("turn principal %q (%v)", turn.Request.Principal, err)
	}

	// Bob cannot see, list, cancel, delete or continue it: it does not exist for him.
	_, err = cb.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiError(t, err, 404, "not_found")
	_, err = cb.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	apiError(t, err, 404, "not_found")
	_, err = cb.Responses.Cancel(ctx, r.ID)
	apiError(t, err, 404, "not_found")
	err = cb.Responses.Delete(ctx, r.ID)
	apiError(t, err, 404, "not_found")
	_, err = cb.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("continue Alice's")}})
	unknown := apiError(t, err, 400, "previous_response_not_found")
	_, err = cb.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String("resp_0000000000000000000000000000dead"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("continue nothing")}})
	if never := apiError(t, err, 400, "previous_response_not_found"); strings.ReplaceAll(never.Message, "resp_0000000000000000000000000000dead", r.ID) != unknown.Message {
		t.Fatalf("another's response must read as unknown: %q vs %q", unknown.Message, never.Message)
	}
	// A background response: Bob cannot resume its stream either.
	bg, err := ca.Responses.New(ctx, bgParams("Alice in the background"))
	if err != nil {
		t.Fatal(err)
	}
	st, _, body = call(t, "GET", url+"/v1/responses/"+bg.ID+"?stream=true&starting_after=0", "", bearer(bob))
	if st != 404 {
		t.Fatalf("Bob resumes Alice's stream: %d %s", st, body)
	}
	// Alice continues her own.
	r2, err := ca.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}})
	if err != nil || r2.Status != responses.ResponseStatusCompleted {
		t.Fatalf("owner continues: %v", err)
	}

	// Named conversations are per principal: the same name is two conversations.
	convOf := func(c openai.Client) string {
		t.Helper()
		if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("in support")},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String("support")}}); err != nil {
			t.Fatal(err)
		}
		_, conv := e.lastCompleted()
		return conv
	}
	aliceConv, bobConv := convOf(ca), convOf(cb)
	if aliceConv == bobConv || !strings.HasSuffix(aliceConv, "-support") || !strings.HasSuffix(bobConv, "-support") {
		t.Fatalf("conversation 'support': alice %s, bob %s", aliceConv, bobConv)
	}
	// Bob naming Alice's scoped conversation id still lands in his own.
	if _, err := cb.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("into Alice's")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(aliceConv)}}); err != nil {
		t.Fatal(err)
	}
	if _, conv := e.lastCompleted(); conv == aliceConv || !strings.HasPrefix(conv, bobConv[:14]) {
		t.Fatalf("bob naming %s ran in %s", aliceConv, conv)
	}
	// /v1/aptix/execute: the principal is the caller's, whatever the body says,
	// and a conversation id is scoped the same way.
	st, _, body = call(t, "POST", url+"/v1/aptix/execute", `{"conversationId":"support","instruction":"hi","principal":"key:alice","ragScope":"none"}`, bearer(bob))
	if st != 200 {
		t.Fatalf("execute: %d %s", st, body)
	}
	m, _ = stream.GetLastMsgForSubject(ctx, "aptix.completed.>")
	turn = contracts.Turn{}
	if err := json.Unmarshal(m.Data, &turn); err != nil || turn.Request.Principal != "key:bob" || turn.ConversationId == "support" {
		t.Fatalf("execute as bob claiming alice: principal %q conversation %s", turn.Request.Principal, turn.ConversationId)
	}

	// Revocation: a second replica, then revoke; both refuse at once.
	url2 := e.authGateway(&auth.Chain{Keys: keys}, logs)
	ca2 := as(url2, alice)
	if _, err := ca2.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("replica 2 before revoke: %v", err)
	}
	other, err := auth.OpenKeys(ctx, e.js, 1) // as `aptix keys revoke` does
	if err != nil {
		t.Fatal(err)
	}
	if done, err := other.Revoke(ctx, "alice"); err != nil || len(done) != 1 {
		t.Fatalf("revoke: %v %v", done, err)
	}
	for _, u := range []string{url2, url} {
		st, h, body := call(t, "GET", u+"/v1/responses/"+r.ID, "", bearer(alice))
		want401(t, "revoked key", st, h, body, "invalid_api_key")
	}
	if st, _, _ := call(t, "GET", url2+"/v1/models", "", bearer(bob)); st != 200 {
		t.Fatalf("bob after alice's revocation: %d", st)
	}
	// Expiry.
	short, _, err := keys.Create(ctx, "short", "", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	st, h, body = call(t, "GET", url+"/v1/models", "", bearer(short))
	want401(t, "expired key", st, h, body, "invalid_api_key")
	if !strings.Contains(logs.String(), "revoked") || !strings.Contains(logs.String(), "expired") {
		t.Fatalf("the log should say why a key was refused:\n%s", logs.String())
	}

	e.settled()
	secrets := []string{alice, bob, short, forged, alice[len("sk-aptix-")+16:], bob[len("sk-aptix-")+16:]}
	noSecrets(t, e.js, logs.String(), secrets...)
}

// jwks is an identity provider for tests: it serves the public keys it
// holds as a JWKS and signs tokens with them.
type jwks struct {
	mu    sync.Mutex
	keys  map[string]any // kid → private key
	order []string
	hits  int
}

func (j *jwks) add(kid string, priv any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.keys == nil {
		j.keys = map[string]any{}
	}
	j.keys[kid] = priv
	j.order = append(j.order, kid)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (j *jwks) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hits++
	var out []map[string]string
	for _, kid := range j.order {
		switch k := j.keys[kid].(type) {
		case *rsa.PrivateKey:
			out = append(out, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PrivateKey:
			pub, _ := k.PublicKey.ECDH()
			raw := pub.Bytes() // 0x04 || X || Y
			out = append(out, map[string]string{"kty": "EC", "kid": kid, "alg": "ES256", "use": "sig", "crv": "P-256",
				"x": b64(raw[1:33]), "y": b64(raw[33:])})
		case ed25519.PrivateKey:
			out = append(out, map[string]string{"kty": "OKP", "kid": kid, "alg": "EdDSA", "use": "sig", "crv": "Ed25519",
				"x": b64(k.Public().(ed25519.PublicKey))})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": out})
}

func (j *jwks) sign(t *testing.T, kid string, method jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	j.mu.Lock()
	priv := j.keys[kid]
	j.mu.Unlock()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGatewayAuthJWT: APTIX_AUTH=keys,jwt with a JWKS served by httptest.
// Accepted: RS256, ES256 and EdDSA tokens with the right issuer and
// audience, and an API key. Refused (401 invalid_token): expired, not yet
// valid, wrong audience, wrong issuer, no exp, alg none, HS256 signed with
// the RSA public key (the key-confusion forgery), a token signed by another
// key under a known kid, an unknown kid. A key rotated in at the identity
// provider (new kid) is accepted after the one refresh it triggers. The
// principal is sub: one subject cannot read another's response. No token
// is logged or stored.
func TestGatewayAuthJWT(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	idp := &jwks{}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edk, _ := ed25519.GenerateKey(rand.Reader)
	idp.add("rsa-1", rk)
	idp.add("ec-1", ek)
	idp.add("ed-1", edk)
	ts := httptest.NewServer(idp)
	t.Cleanup(ts.Close)
	jctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := auth.NewJWT(jctx, auth.JWTConfig{JWKSURL: ts.URL, Issuer: "https://idp.test", Audience: "aptix", Leeway: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	apiKey, _, _ := keys.Create(ctx, "ci", "", 0)
	logs := &logBuf{}
	url := e.authGateway(&auth.Chain{Keys: keys, JWT: v}, logs)

	now := time.Now()
	claims := func(sub string, mut ...func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": sub, "iss": "https://idp.test", "aud": "aptix", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for _, m := range mut {
			m(c)
		}
		return c
	}
	alice := idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice"))
	var used []string
	ok := func(what, tok string) {
		t.Helper()
		used = append(used, tok)
		if st, _, body := call(t, "GET", url+"/v1/models", "", bearer(tok)); st != 200 {
			t.Fatalf("%s: %d %s", what, st, body)
		}
	}
	refused := func(what, tok string) {
		t.Helper()
		used = append(used, tok)
		st, h, body := call(t, "GET", url+"/v1/models", "", bearer(tok))
		want401(t, what, st, h, body, "invalid_token")
	}
	ok("RS256", alice)
	ok("ES256", idp.sign(t, "ec-1", jwt.SigningMethodES256, claims("alice")))
	ok("EdDSA", idp.sign(t, "ed-1", jwt.SigningMethodEdDSA, claims("alice")))
	ok("exp within the leeway", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Second).Unix() })))
	if st, _, _ := call(t, "GET", url+"/v1/models", "", bearer(apiKey)); st != 200 {
		t.Fatalf("API key in keys,jwt mode: %d", st)
	}

	st, h, body := call(t, "GET", url+"/v1/models", "", nil)
	want401(t, "no credentials", st, h, body, "invalid_api_key")
	refused("expired", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })))
	refused("not yet valid", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })))
	refused("no exp", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { delete(c, "exp") })))
	refused("wrong audience", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { c["aud"] = "someone-else" })))
	refused("wrong issuer", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("alice", func(c jwt.MapClaims) { c["iss"] = "https://evil.test" })))
	refused("no sub", idp.sign(t, "rsa-1", jwt.SigningMethodRS256, claims("", func(c jwt.MapClaims) { delete(c, "sub") })))
	// alg none: an unsigned token.
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims("alice"))
	none.Header["kid"] = "rsa-1"
	unsigned, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	refused("alg none", unsigned)
	// HS256 with the RSA public key as the HMAC secret (PEM and DER).
	der, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	for _, secret := range [][]byte{pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), der} {
		hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("alice"))
		hs.Header["kid"] = "rsa-1"
		forged, _ := hs.SignedString(secret)
		refused("HS256 signed with the public key", forged)
	}
	// A key the IdP never published, under a kid it did.
	evil, _ := rsa.GenerateKey(rand.Reader, 2048)
	et := jwt.NewWithClaims(jwt.SigningMethodRS256, claims("alice"))
	et.Header["kid"] = "rsa-1"
	wrongKey, _ := et.SignedString(evil)
	refused("signed by another key", wrongKey)
	// RS256 header on the EC key's kid: the algorithm must match the key.
	mix := jwt.NewWithClaims(jwt.SigningMethodRS256, claims("alice"))
	mix.Header["kid"] = "ec-1"
	mixed, _ := mix.SignedString(rk)
	refused("RS256 under an ES256 kid", mixed)
	refused("garbage", "not.a.jwt")

	// Rotation: the IdP publishes a new key; its first token makes the
	// gateway refresh the JWKS once and is accepted.
	idp.mu.Lock()
	before := idp.hits
	idp.mu.Unlock()
	rk2, _ := rsa.GenerateKey(rand.Reader, 2048)
	idp.add("rsa-2", rk2)
	ok("unknown kid after rotation", idp.sign(t, "rsa-2", jwt.SigningMethodRS256, claims("bob")))
	idp.mu.Lock()
	after := idp.hits
	idp.mu.Unlock()
	if after != before+1 {
		t.Fatalf("JWKS fetched %d times for one rotation", after-before)
	}
	// A kid that is nowhere: refused, without another refresh (rate-limited).
	ghost := jwt.NewWithClaims(jwt.SigningMethodRS256, claims("alice"))
	ghost.Header["kid"] = "ghost"
	gt, _ := ghost.SignedString(evil)
	refused("unknown kid", gt)
	idp.mu.Lock()
	if idp.hits != after {
		t.Fatalf("an unknown kid refreshed the JWKS again (%d fetches)", idp.hits-after)
	}
	idp.mu.Unlock()

	// Ownership by sub.
	bob := idp.sign(t, "rsa-2", jwt.SigningMethodRS256, claims("bob"))
	used = append(used, bob)
	ca, cb := as(url, alice), as(url, bob)
	r, err := ca.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Alice's")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cb.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	apiError(t, err, 404, "not_found")
	if _, err := ca.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "expired") || !strings.Contains(logs.String(), "audience") {
		t.Fatalf("the log should say which check failed:\n%s", logs.String())
	}
	e.settled()
	var sigs []string
	for _, tok := range used {
		if parts := strings.Split(tok, "."); len(parts) == 3 && len(parts[2]) > 16 {
			sigs = append(sigs, parts[2])
		}
	}
	noSecrets(t, e.js, logs.String(), append(append(used, sigs...), apiKey)...)
}

// TestGatewayAuthLimits: APTIX_LIMIT_RPM → 429 rate_limit_exceeded with
// Retry-After once a principal's minute is used up (another principal is
// unaffected); APTIX_LIMIT_BACKGROUND → 429 for a background create while
// the principal's limit of responses is queued or running, admitted again
// once one ends.
func TestGatewayAuthLimits(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 1500 * time.Millisecond}, slowProfile)
	ctx := ctxT(t)
	keys, _ := auth.OpenKeys(ctx, e.js, 1)
	a, _, _ := keys.Create(ctx, "a", "", 0)
	b, _, _ := keys.Create(ctx, "b", "", 0)
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, func(c *httpapi.Config) { c.LimitRPM = 3 })
	for i := 0; i < 3; i++ {
		if st, _, body := call(t, "GET", url+"/v1/models", "", bearer(a)); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, body)
		}
	}
	st, h, body := call(t, "GET", url+"/v1/models", "", bearer(a))
	if st != 429 || h.Get("Retry-After") == "" || h.Get("Retry-After") == "0" || !strings.Contains(body, `"code":"rate_limit_exceeded"`) {
		t.Fatalf("4th request in a minute: %d %q %s", st, h.Get("Retry-After"), body)
	}
	ca := as(url, a)
	_, err := ca.Models.List(ctx)
	apiError(t, err, 429, "rate_limit_exceeded")

	if st, _, body := call(t, "GET", url+"/v1/models", "", bearer(b)); st != 200 {
		t.Fatalf("another principal: %d %s", st, body)
	}

	// Background: b has one slot (a replica without a request rate).
	cb := as(e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, func(c *httpapi.Config) { c.LimitBackground = 1 }), b)
	r1, err := cb.Responses.New(ctx, bgParams("first"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cb.Responses.New(ctx, bgParams("second"))
	apiError(t, err, 429, "rate_limit_exceeded")
	deadline := time.Now().Add(15 * time.Second)
	for {
		g, err := cb.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if g.Status == responses.ResponseStatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first background response still %s", g.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := cb.Responses.New(ctx, bgParams("third")); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	e.settled()
}
