package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

func run(t *testing.T, url, data string, args ...string) string {
	t.Helper()
	connect := func(string) (*nats.Conn, func(), error) {
		nc, err := nats.Connect(url)
		return nc, func() { nc.Close() }, err
	}
	root := &cobra.Command{Use: "aptix", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands(connect, func() string { return data })...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("aptix %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestIndexThenSearch(t *testing.T) {
	_, url := natstest.Start(t)
	data := t.TempDir()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "dur.go"), []byte("package d\n\n// ParseDuration parses a duration.\nfunc ParseDuration(s string) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, url, data, "index", src, "--workspace", "w", "--repo", "r")
	if !strings.Contains(out, "repo r: 1 files (0 unchanged, 1 written, 0 deleted), 2 chunks") {
		t.Fatalf("index output %q", out)
	}
	out = run(t, url, data, "search", "parse a duration", "--workspace", "w", "--json")
	var c contracts.RagChunk
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &c); err != nil {
		t.Fatalf("want one JSON line, got %q: %v", out, err)
	}
	if c.Path != "dur.go" || c.Repo != "r" || c.StartLine != 3 || c.EndLine != 4 || !strings.HasPrefix(c.Id, "ck_") {
		t.Errorf("hit %+v", c)
	}
	out = run(t, url, data, "search", "parse a duration", "--workspace", "w")
	if !strings.Contains(out, "1. dur.go:3-4") || !strings.Contains(out, "1 hits") {
		t.Errorf("readable output %q", out)
	}
	out = run(t, url, data, "search", "parse a duration", "--workspace", "w", "--explain")
	if !strings.Contains(out, "query terms: pars durat") || !strings.Contains(out, "matched: symbol[durat pars] doc[durat pars] summary[durat pars] content[durat pars]  near in meaning #1\n") {
		t.Errorf("explained output %q", out)
	}
	// A use elsewhere: the explanation says how many chunks use the hit.
	if err := os.WriteFile(filepath.Join(src, "use.go"), []byte("package d\n\nfunc use() { ParseDuration(\"1s\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, url, data, "index", src, "--workspace", "w", "--repo", "r")
	out = run(t, url, data, "search", "parse a duration", "--workspace", "w", "--explain")
	if !strings.Contains(out, "1. dur.go:3-4") || !strings.Contains(out, "  used by 1\n2. use.go") {
		t.Errorf("explained output with a use %q", out)
	}
	out = run(t, url, data, "search", "parse a duration", "--workspace", "elsewhere")
	if !strings.Contains(out, "no hits") {
		t.Errorf("empty workspace output %q", out)
	}
}

func TestIndexMissingPath(t *testing.T) {
	_, url := natstest.Start(t)
	connect := func(string) (*nats.Conn, func(), error) {
		nc, err := nats.Connect(url)
		return nc, func() { nc.Close() }, err
	}
	root := &cobra.Command{Use: "aptix", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands(connect, t.TempDir)...)
	root.SetArgs([]string{"index", "/no/such/dir", "--workspace", "w", "--repo", "r"})
	root.SetOut(&bytes.Buffer{})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/no/such/dir") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err %v", err)
	}
}

// TestSearchOnAnotherServerRebuilds: `aptix search` with a local index
// synced from another server says so, rebuilds, and answers from this one.
func TestSearchOnAnotherServerRebuilds(t *testing.T) {
	_, urlA := natstest.Start(t)
	_, urlB := natstest.Start(t)
	data := t.TempDir()
	srcA, srcB := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(srcA, "a.go"), []byte("package a\n\n// StaleHandler is only on server A.\nfunc StaleHandler() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcB, "b.go"), []byte("package b\n\n// FreshHandler is only on server B.\nfunc FreshHandler() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, urlA, data, "index", srcA, "--workspace", "w", "--repo", "r")
	run(t, urlB, data, "index", srcB, "--workspace", "w", "--repo", "r")
	if out := run(t, urlA, data, "search", "stale handler", "--workspace", "w"); !strings.Contains(out, "1. a.go") {
		t.Fatalf("search on A: %q", out)
	}
	out := run(t, urlB, data, "search", "stale handler", "--workspace", "w")
	if !strings.Contains(out, "synced from another chunk store") || !strings.Contains(out, "rebuilding") || strings.Contains(out, "a.go") {
		t.Fatalf("search on B with A's local index: %q", out)
	}
}

func TestAkin(t *testing.T) {
	for _, c := range []struct {
		in   []contracts.RagAkin
		want string
	}{
		{nil, ""},
		{[]contracts.RagAkin{{Term: "meet", Word: "satisfi", Cosine: 0.431}, {Term: "folder", Word: "directori", Cosine: 0.4}}, "  akin: meet~satisfi 0.43, folder~directori 0.40"},
	} {
		if got := Akin(c.in); got != c.want {
			t.Errorf("Akin(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}
