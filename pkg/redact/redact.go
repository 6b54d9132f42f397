// Package redact removes credentials from text a backend sent before Aptix
// passes it on. A backend may echo the request's Authorization header or
// its API key in an error message; relayed as is, the profile's key reached
// the client, the log, a stream's error event and the trace. The LLM caller
// runs every upstream error through a Redactor where it enters Aptix, so
// every sink after it gets the redacted text.
package redact

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Mask replaces a credential.
const Mask = "[REDACTED]"

// minSecret is the shortest exact value redacted: a shorter "key" is no
// credential worth hiding, and masking every occurrence of, say, "abc"
// would garble the message.
const minSecret = 6

// Redactor masks a profile's own credentials (their exact values, as
// written and as a JSON string escapes them) and anything shaped like a
// credential: "Bearer …"/"Basic …" tokens, sk-… keys, and the values of
// Authorization, x-api-key and api_key fields, whether the text is a
// header dump, a query string or JSON. The zero value masks the shapes only.
type Redactor struct {
	secrets []string
}

// New returns a Redactor for the given secret values; empty and very short
// ones are ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		r.secrets = append(r.secrets, s)
		// As a JSON string may carry it: escaped by encoding/json, and with
		// "/" as "\/" (PHP, some proxies).
		if b, err := json.Marshal(s); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != s {
				r.secrets = append(r.secrets, esc)
			}
		}
		if strings.Contains(s, "/") {
			r.secrets = append(r.secrets, strings.ReplaceAll(s, "/", `\/`))
		}
	}
	return r
}

var (
	// scheme matches an authorization scheme and its credentials.
	scheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=:-]{6,})`)
	// skKey matches OpenAI- and Anthropic-style keys (sk-…, sk-proj-…, sk-ant-…).
	skKey = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{12,}`)
	// field matches a credential-carrying header, JSON member or query
	// parameter and its value; a value that is a scheme is left to scheme.
	field = regexp.MustCompile(`(?i)\b(authorization|proxy-authorization|x-api-key|api[_-]?key|access[_-]?token)(["']?\s*[:=]\s*["']?)([^\s"'&,;}\]]+)`)
)

// String returns s with every credential masked; s itself when it has none.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	s = r.Secrets(s)
	s = scheme.ReplaceAllStringFunc(s, func(m string) string {
		sub := scheme.FindStringSubmatch(m)
		if strings.HasPrefix(sub[3], Mask) || !strings.EqualFold(sub[1], "bearer") && !opaque(sub[3]) {
			return m // masked already, or "basic information", "the token expired"
		}
		return sub[1] + sub[2] + Mask
	})
	s = skKey.ReplaceAllString(s, Mask)
	return field.ReplaceAllStringFunc(s, func(m string) string {
		sub := field.FindStringSubmatch(m)
		v := sub[3]
		if strings.HasPrefix(v, Mask) || isScheme(v) {
			return m // already masked, or "Authorization: Bearer [REDACTED]"
		}
		return sub[1] + sub[2] + Mask
	})
}

// Secrets masks only the exact credentials: cheap enough for a whole
// answer, which is only scanned for them.
func (r *Redactor) Secrets(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}

// opaque tells a credential from a word: what follows "Basic" or "Token"
// is one only if it has a digit, a base64 sign or mixed case inside.
func opaque(v string) bool {
	if len(v) < 8 {
		return false
	}
	for i, c := range v {
		switch {
		case c >= '0' && c <= '9', c == '=', c == '+', c == '/', c == '_':
			return true
		case i > 0 && c >= 'A' && c <= 'Z':
			return true
		}
	}
	return false
}

func isScheme(v string) bool {
	switch strings.ToLower(v) {
	case "bearer", "basic", "token":
		return true
	}
	return false
}
