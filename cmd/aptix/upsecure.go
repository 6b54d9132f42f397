package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// What `aptix up` requires on an address beyond loopback (docs/security.md):
//
//   - NATS gives every client every stream, so on such an address it
//     accepts only the nkey `up` generates into the data directory
//     (nkeys/aptix.nk, readable by its owner only). `up` prints the path;
//     the CLI uses it by itself when it finds it there (or --nkey, or
//     APTIX_NATS_NKEY). Only an explicit APTIX_AUTH=none leaves NATS open.
//   - The MCP endpoint answers only requests that carry a credential the
//     gateway accepts (an API key or a JWT, APTIX_AUTH); with APTIX_AUTH
//     unset `up` refuses to start, as it does for the gateway. The
//     in-process tool loop reaches it with a token of its own.

// upNkeyFile is the nkey seed `up` generates for NATS beyond loopback.
func upNkeyFile(dir string) string { return filepath.Join(dir, "nkeys", "aptix.nk") }

// secureNATS reports whether NATS on listen must require credentials.
func secureNATS(listen string) bool {
	raw, explicit := os.LookupEnv("APTIX_AUTH")
	if explicit && strings.TrimSpace(raw) == "none" {
		return false
	}
	return !auth.Loopback(listen)
}

// ensureNkey returns the public key of the nkey seed in file, creating the
// seed (mode 0600, in a 0700 directory) when there is none.
func ensureNkey(file string) (string, error) {
	seed, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", fmt.Errorf("create the NATS nkey: %w", err)
		}
		if seed, err = kp.Seed(); err != nil {
			return "", fmt.Errorf("create the NATS nkey: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(file), err)
		}
		if err := os.WriteFile(file, append(seed, '\n'), 0o600); err != nil {
			return "", fmt.Errorf("write the NATS nkey %s: %w", file, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("read the NATS nkey %s: %w", file, err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return "", fmt.Errorf("the NATS nkey %s: %w", file, err)
	}
	return kp.PublicKey()
}

// nkeyUsers is the embedded server's only user: the holder of pub, with
// every permission (the all-in-one runs every stage on one connection).
func nkeyUsers(pub string) []*server.NkeyUser {
	return []*server.NkeyUser{{Nkey: pub}}
}

// defaultNkey is the nkey seed the CLI uses when none is given: the one a
// secured `aptix up` on this data directory generated, if any.
func defaultNkey(dir string) string {
	f := upNkeyFile(dir)
	if _, err := os.Stat(f); err == nil {
		return f
	}
	return ""
}

// internalToken is a random bearer token the in-process tool loop sends to
// the MCP endpoint `up` serves.
func internalToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "aptix-internal-" + base64.RawURLEncoding.EncodeToString(b), nil
}

// requireCredential wraps h: a request must carry the internal token or a
// credential a accepts; others get 401 in OpenAI's error shape.
func requireCredential(h http.Handler, a auth.Authenticator, internal string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && internal != "" &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(internal)) == 1 {
			h.ServeHTTP(w, r)
			return
		}
		p, f := a.Authenticate(r)
		if f != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="aptix"`)
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"message": "The MCP endpoint needs an Aptix API key or token: " + f.Reason, "type": "invalid_request_error", "param": nil, "code": f.Code}})
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), p)))
	})
}
