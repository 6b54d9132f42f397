package mcp

import (
	"fmt"
	"regexp"
	"strings"
)

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces ${VAR} and ${VAR:-default} in s with values from getenv.
// A variable that is unset or empty and has no default is an error naming it,
// so a missing secret fails at start rather than as a 401 mid-turn. A "$" not
// followed by "{" is kept as is (URLs and arguments may contain one).
func expand(s string, getenv func(string) string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf(`unterminated "${" (want ${VAR} or ${VAR:-default})`)
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !varNameRE.MatchString(name) {
			return "", fmt.Errorf("bad variable name %q in ${...}", name)
		}
		switch v := getenv(name); {
		case v != "":
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		s = s[i+end+1:]
	}
}
