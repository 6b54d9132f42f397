package main

import (
	"encoding/json"
	"net/url"
	"os"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// TestDefaultAddressesDiffer: everything the binary serves by default has
// its own address, so `aptix idp`, `aptix mcp` and `aptix sandbox` run next
// to `aptix up` with their defaults (idp and up --mcp both took 8090, so the
// JWT walk-through failed at its second command), and no example profile
// points a backend at one of them (local-llama pointed at the gateway).
func TestDefaultAddressesDiffer(t *testing.T) {
	served := map[string]string{} // address → flag
	for _, f := range [][2]string{{"up", "listen"}, {"up", "http"}, {"up", "mcp"}, {"mcp", "http"}, {"idp", "listen"}, {"sandbox", "addr"}, {"webhook-receiver", "listen"}} {
		cmd, _, err := root.Find([]string{f[0]})
		if err != nil || cmd.Name() != f[0] {
			t.Fatalf("no command %s: %v", f[0], err)
		}
		fl := cmd.Flags().Lookup(f[1])
		if fl == nil || fl.DefValue == "" {
			t.Fatalf("aptix %s has no --%s default", f[0], f[1])
		}
		name := "aptix " + f[0] + " --" + f[1]
		if other, ok := served[fl.DefValue]; ok {
			t.Fatalf("%s and %s both default to %s", other, name, fl.DefValue)
		}
		served[fl.DefValue] = name
	}
	if u, _ := url.Parse(profiles.DefaultSandboxURL); served[u.Host] != "aptix sandbox --addr" {
		t.Fatalf("the sandbox profile's %s is not where aptix sandbox listens: %v", u.Host, served)
	}
	data, err := os.ReadFile("../../examples/profiles.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Profiles map[string]struct {
			BaseURL string `json:"baseUrl"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	for name, p := range file.Profiles {
		u, err := url.Parse(p.BaseURL)
		if err != nil {
			t.Fatalf("profile %s: %v", name, err)
		}
		if by, ok := served[u.Host]; ok {
			t.Fatalf("examples/profiles.json %s points at %s, where %s serves", name, u.Host, by)
		}
	}
}
