// Package gateway_test holds the gateway module's structure checks.
package gateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoStage: the gateway is a client of the bus and a front door,
// never a stage: what it shares with a stage (tool parsing, the context
// block) lives in pkg/. A stage package among its dependencies, direct or
// not, means a rule now has two owners.
func TestImportsNoStage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const services = "github.com/aptix-dev/aptix/services/"
	for _, p := range strings.Fields(string(out)) {
		p, _, _ = strings.Cut(p, " ") // a test variant: "pkg [pkg.test]"
		rest, ok := strings.CutPrefix(p, services)
		if ok && rest != "gateway" && rest != "gateway_test" && rest != "gateway.test" && !strings.HasPrefix(rest, "gateway/") {
			t.Errorf("the gateway depends on %s", p)
		}
	}
}
