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

// TestDoorsImportNoStore: a front door decodes, calls the application
// (services/gateway/application) and encodes; the stores, the streams and
// the bus are the application's. A door that imports one of them has
// started doing the application's work, which the next door would then
// have to repeat.
//
// The console is not held to it yet: it is the operator's view of the bus
// itself (turn events, dead letters, the usage totals and the KV records),
// read directly and read-only, and no operation of the application serves
// those reads so far.
func TestDoorsImportNoStore(t *testing.T) {
	const mod = "github.com/aptix-dev/aptix/"
	doors := []string{"./httpapi", "./chat", "./messages"}
	forbidden := []string{
		"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream",
		mod + "pkg/pipeline/store", mod + "pkg/pipeline/client", mod + "pkg/pipeline/claim",
	}
	for _, door := range doors {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, door).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", door, err, out)
		}
		imports := strings.Fields(string(out))
		if len(imports) == 0 {
			t.Fatalf("go list %s: no imports listed", door)
		}
		for _, p := range imports {
			for _, f := range forbidden {
				if p == f {
					t.Errorf("front door %s imports %s: call the application instead", door, p)
				}
			}
		}
	}
}
