package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"
)

// aptix idp: a development identity provider, so APTIX_AUTH=jwt can be
// tried against `make run` without a real one. It holds one Ed25519 key in
// memory (a restart is a key rotation), serves it as a JWKS and mints
// tokens for any subject on request: loopback only, never for production.
func init() {
	var listen, aud string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "idp",
		Short: "A development JWT issuer for APTIX_AUTH=jwt: JWKS at /jwks.json, tokens at /token?sub=NAME (loopback only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _, err := net.SplitHostPort(listen)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				return usagef("--listen %q: the development issuer listens on loopback only", listen)
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			kid := fmt.Sprintf("dev-%d", time.Now().Unix())
			iss := "http://" + listen
			jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
				"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid,
				"x": base64.RawURLEncoding.EncodeToString(pub)}}})
			mux := http.NewServeMux()
			mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(jwks)
			})
			mux.HandleFunc("GET /token", func(w http.ResponseWriter, r *http.Request) {
				sub := r.URL.Query().Get("sub")
				if sub == "" {
					http.Error(w, "sub is required", http.StatusBadRequest)
					return
				}
				now := time.Now()
				t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": iss, "aud": aud, "sub": sub,
					"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix()})
				t.Header["kid"] = kid
				s, err := t.SignedString(priv)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				_, _ = fmt.Fprintln(w, s)
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Development JWT issuer (NOT for production): key %s, tokens valid %s\n"+
				"  APTIX_AUTH=jwt APTIX_JWKS_URL=%s/jwks.json APTIX_JWT_ISSUER=%s APTIX_JWT_AUDIENCE=%s make run\n"+
				"  TOKEN=$(curl -s '%s/token?sub=alice')\n", kid, ttl, iss, iss, aud, iss)
			hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			go func() { <-cmd.Context().Done(); _ = hs.Close() }()
			if err := hs.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultIDPListen, "loopback address to serve on")
	cmd.Flags().StringVar(&aud, "audience", "aptix", "the aud claim of the tokens")
	cmd.Flags().DurationVar(&ttl, "ttl", time.Hour, "token lifetime")
	root.AddCommand(cmd)
}
