package redact

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	const key = "sk-proj-AbCdEf0123456789xyz"
	const custom = "tok_live/9f8e+7d6c5b4" // a key of no known shape, with a "/" JSON may escape
	r := New(key, custom, "", "abc", "k<ey-1234567")
	for _, tc := range []struct{ name, in, want string }{
		{"nothing to hide", "model gpt-5 not found", "model gpt-5 not found"},
		{"empty", "", ""},
		{"echoed header", "invalid header Authorization: Bearer " + key + " for this org",
			"invalid header Authorization: Bearer [REDACTED] for this org"},
		{"profile key alone", "key " + key + " is revoked", "key [REDACTED] is revoked"},
		{"profile key in JSON", `{"error":{"message":"bad key \"` + key + `\""}}`, `{"error":{"message":"bad key \"[REDACTED]\""}}`},
		{"custom key exact", "got " + custom + " twice: " + custom, "got [REDACTED] twice: [REDACTED]"},
		{"custom key JSON-escaped", `{"detail":"got tok_live\/9f8e+7d6c5b4"}`, `{"detail":"got [REDACTED]"}`},
		{"foreign bearer", "upstream said: bearer eyJhbGciOiJIUzI1NiJ9.e30.sig is expired", "upstream said: bearer [REDACTED] is expired"},
		{"basic", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED]"},
		{"foreign sk key", "Incorrect API key provided: sk-ant-api03-ZZZZZZZZZZZZZZZZ.", "Incorrect API key provided: [REDACTED]."},
		{"x-api-key header", "headers: x-api-key: 0123456789abcdef\nhost: a", "headers: x-api-key: [REDACTED]\nhost: a"},
		{"x-api-key JSON", `{"headers":{"X-Api-Key":"0123456789abcdef","Accept":"*/*"}}`, `{"headers":{"X-Api-Key":"[REDACTED]","Accept":"*/*"}}`},
		{"authorization JSON", `{"authorization":"Bearer 0123456789abcdef"}`, `{"authorization":"Bearer [REDACTED]"}`},
		{"query string", "GET /v1/x?api_key=0123456789abcdef&model=m", "GET /v1/x?api_key=[REDACTED]&model=m"},
		{"HTML-escaped by Go", `{"m":"k\u003cey-1234567"}`, `{"m":"[REDACTED]"}`},
		{"short secrets ignored", "abc is fine", "abc is fine"},
		{"a word after bearer that is too short", "bearer of bad news", "bearer of bad news"},
		{"words after basic and token", "basic information: the token expired, Token Expired", "basic information: the token expired, Token Expired"},
		{"token scheme", "Authorization: token ghp_abc123def456", "Authorization: token [REDACTED]"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestZeroValue: a nil or empty Redactor still masks credential shapes.
func TestZeroValue(t *testing.T) {
	var r *Redactor
	if got := r.String("Authorization: Bearer sk-AAAAAAAAAAAAAAAAAAAA"); strings.Contains(got, "AAAA") {
		t.Fatal(got)
	}
	if got := r.Secrets("plain"); got != "plain" {
		t.Fatal(got)
	}
}

// TestSecretsOnly: Secrets masks the exact values and leaves shapes alone
// (it is what a whole answer gets).
func TestSecretsOnly(t *testing.T) {
	r := New("my-secret-value")
	if got := r.Secrets("a my-secret-value and Bearer abcdefghij"); got != "a [REDACTED] and Bearer abcdefghij" {
		t.Fatal(got)
	}
}
