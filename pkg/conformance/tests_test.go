package conformance_test

import (
	"os"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
)

// Every test of the suite is documented in README.md, and the compliance
// tests' ids the issue names are all present.
func TestEveryTestIsListedAndDocumented(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tc := range conformance.Tests() {
		if names[tc.Name] || tc.Intent == "" {
			t.Errorf("test %q duplicated or without intent", tc.Name)
		}
		names[tc.Name] = true
		if !strings.Contains(string(readme), "| `"+tc.Name+"` |") {
			t.Errorf("README.md does not document %q", tc.Name)
		}
	}
	if len(conformance.Public()) != 10 {
		t.Errorf("%d public tests, want the 10 HTTP compliance tests", len(conformance.Public()))
	}
	for _, want := range append(conformance.Public(), "assistant-phase", "compaction", "compaction-without-model") {
		if !names[want] {
			t.Errorf("compliance test %q missing", want)
		}
	}
}
