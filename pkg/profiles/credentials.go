package profiles

import "strings"

// Credentials are the secret values the profile sends: its API key and
// the values of headers that carry one (a name with auth, key, token,
// secret, cookie or password in it, or a "Bearer …" value). Error text a
// backend sends back is redacted of them (pkg/redact) before anyone sees
// it; the other headers (HTTP-Referer, X-Title) are not secrets, and
// masking them would garble messages for nothing.
func (p Profile) Credentials() []string {
	var out []string
	if k := p.APIKey(); k != "" {
		out = append(out, k)
	}
	for name, v := range p.Headers {
		if v != "" && secretHeader(name, v) {
			out = append(out, v)
			if _, tok, ok := strings.Cut(v, " "); ok && tok != "" {
				out = append(out, tok) // "Bearer xyz": xyz alone too
			}
		}
	}
	return out
}

func secretHeader(name, value string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "key", "token", "secret", "cookie", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	v := strings.ToLower(value)
	return strings.HasPrefix(v, "bearer ") || strings.HasPrefix(v, "basic ")
}
