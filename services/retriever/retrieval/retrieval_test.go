package retrieval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a small repository with one of each thing the walker must
// index or skip.
func fixture(t *testing.T) string {
	root := t.TempDir()
	write(t, root, "timeutil/duration.go", `package timeutil

// ParseDuration parses a duration string such as "1h30m" into a time.Duration.
func ParseDuration(s string) (int64, error) {
	return 0, nil
}

// FormatDuration renders a duration for humans.
func FormatDuration(d int64) string {
	return ""
}
`)
	write(t, root, "net/retry.go", `package net

// RetryPolicy decides how often a failed request is retried with exponential backoff.
type RetryPolicy struct {
	MaxAttempts int
}

// Backoff returns the delay before the given attempt.
func (p RetryPolicy) Backoff(attempt int) int { return attempt * 2 }
`)
	write(t, root, "scripts/deploy.py", "def deploy_service(name):\n    \"\"\"Roll out a service to the cluster.\"\"\"\n    return name\n")
	write(t, root, "README.md", "# Fixture\n\nA tiny repository.\n\n## Retry policy\n\nRequests are retried with backoff.\n")
	write(t, root, ".gitignore", "secret/\n*.log\n")
	write(t, root, "secret/keys.go", "package secret\n\nconst Key = \"parse duration\"\n")
	write(t, root, "app.log", "parse duration log line\n")
	write(t, root, "vendor/github.com/x/y/y.go", "package y\n\nfunc ParseDurationVendored() {}\n")
	write(t, root, "sub/.gitignore", "ignored.go\n")
	write(t, root, "sub/ignored.go", "package sub\n\nfunc ParseDurationIgnored() {}\n")
	write(t, root, "bin/tool.bin", "\x00\x01\x02binary\x00")
	write(t, root, "bad/latin1.go", "package bad\n\n// caf\xe9\nfunc X() {}\n")
	big := filepath.Join(root, "data", "huge.go")
	if err := os.MkdirAll(filepath.Dir(big), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil { // 50 MB, sparse
		t.Fatal(err)
	}
	f.Close()
	return root
}

type env struct {
	t  *testing.T
	js jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	_, js := natstest.JetStream(t)
	return &env{t: t, js: js}
}

func (e *env) index(root, workspace, repo string, tags ...string) Summary {
	e.t.Helper()
	s, err := IndexDir(context.Background(), e.js, root, IndexOptions{Workspace: workspace, Repo: repo, Tags: tags})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) open() *Index {
	e.t.Helper()
	ix, err := Open(context.Background(), e.js, Options{DataDir: e.t.TempDir()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ix.Close() })
	return ix
}

func find(t *testing.T, ix *Index, req contracts.AgentExecuteRequest) []contracts.RagChunk {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ix.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := ix.Search(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return r.Chunks
}

func paths(c []contracts.RagChunk) []string {
	var out []string
	for _, h := range c {
		out = append(out, h.Path)
	}
	return out
}

func TestIndexSkipsWithReasons(t *testing.T) {
	e := newEnv(t)
	s := e.index(fixture(t), "ws", "app")
	if s.Files != 4 || s.Written != 4 || s.Deleted != 0 {
		t.Errorf("summary %s", s)
	}
	for reason, n := range map[string]int{"over 1 MiB": 1, "invalid UTF-8": 1, "binary": 1, SkipVendored: 1, SkipIgnored: 3, SkipHidden: 2} {
		if s.Skipped[reason] != n {
			t.Errorf("skipped[%q] = %d, want %d (all: %v)", reason, s.Skipped[reason], n, s.Skipped)
		}
	}
	if !strings.Contains(s.String(), "4 files") {
		t.Errorf("summary line %q", s)
	}
}

func TestIndexBadRoot(t *testing.T) {
	e := newEnv(t)
	_, err := IndexDir(context.Background(), e.js, "/does/not/exist", IndexOptions{Workspace: "ws", Repo: "r"})
	if err == nil || !strings.Contains(err.Error(), "/does/not/exist") {
		t.Fatalf("want a clear error, got %v", err)
	}
	if _, err := IndexDir(context.Background(), e.js, t.TempDir(), IndexOptions{Workspace: "bad space", Repo: "r"}); err == nil {
		t.Fatal("a workspace that is not a token was accepted")
	}
}

func TestSearchFindsAndScopes(t *testing.T) {
	e := newEnv(t)
	root := fixture(t)
	e.index(root, "ws", "app", "backend")
	other := t.TempDir()
	write(t, other, "cli/flags.go", "package cli\n\n// parseDurationFlag parses a duration flag.\nfunc parseDurationFlag(s string) {}\n")
	e.index(other, "ws", "cli", "frontend")
	ix := e.open()

	got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "how do we parse a duration string?"})
	if len(got) == 0 || got[0].Path != "timeutil/duration.go" || !strings.Contains(got[0].Content, "func ParseDuration") {
		t.Fatalf("top hit %v", paths(got))
	}
	if got[0].Id == "" || got[0].StartLine != 3 || got[0].Language != "Go" || got[0].Repo != "app" || got[0].Score <= 0 {
		t.Errorf("hit fields %+v", got[0])
	}
	for _, h := range got {
		if strings.Contains(h.Content, "Vendored") || strings.Contains(h.Content, "Ignored") || strings.Contains(h.Content, "Key =") {
			t.Errorf("ignored or vendored source was indexed: %s", h.Path)
		}
	}
	tests := []struct {
		name string
		req  contracts.AgentExecuteRequest
		want []string // every hit's path must be one of these
	}{
		{"repo scope", contracts.AgentExecuteRequest{RagScope: "repo", Repo: "cli", Instruction: "parse duration"}, []string{"cli/flags.go"}},
		{"language", contracts.AgentExecuteRequest{Language: "Python", Instruction: "deploy service"}, []string{"scripts/deploy.py"}},
		{"tags", contracts.AgentExecuteRequest{Tags: []string{"frontend"}, Instruction: "parse duration"}, []string{"cli/flags.go"}},
		{"active files scope", contracts.AgentExecuteRequest{RagScope: "activeFiles", ActiveFiles: []string{"net/retry.go"}, Instruction: "retry backoff"}, []string{"net/retry.go"}},
		{"other workspace", contracts.AgentExecuteRequest{WorkspaceId: "nobody", Instruction: "parse duration"}, nil},
		{"none", contracts.AgentExecuteRequest{RagScope: "none", Instruction: "parse duration"}, nil},
		{"active scope without files", contracts.AgentExecuteRequest{RagScope: "activeFiles", Instruction: "parse duration"}, nil},
	}
	for _, tt := range tests {
		tt.req.WorkspaceId = map[bool]string{true: tt.req.WorkspaceId, false: "ws"}[tt.req.WorkspaceId != ""]
		got := find(t, ix, tt.req)
		if len(tt.want) == 0 && len(got) != 0 {
			t.Errorf("%s: want no hits, got %v", tt.name, paths(got))
		}
		if len(tt.want) > 0 && len(got) == 0 {
			t.Errorf("%s: no hits", tt.name)
		}
		for _, h := range got {
			if !contains(tt.want, h.Path) {
				t.Errorf("%s: hit %s outside %v", tt.name, h.Path, tt.want)
			}
		}
	}

	// The README and net/retry.go both speak of retries; the active file wins.
	plain := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "retry policy backoff"})
	boosted := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "retry policy backoff", ActiveFiles: []string{"README.md"}})
	if len(plain) < 2 || boosted[0].Path != "README.md" || plain[0].Path == "README.md" {
		t.Errorf("active-file boost: plain %v, boosted %v", paths(plain), paths(boosted))
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func ids(c []contracts.RagChunk) map[string]string {
	out := map[string]string{}
	for _, h := range c {
		out[h.Path+":"+h.Content[:min(20, len(h.Content))]] = h.Id
	}
	return out
}

func TestIncrementalReindexStableIDsAndDeletion(t *testing.T) {
	e := newEnv(t)
	root := fixture(t)
	e.index(root, "ws", "app")
	ix := e.open()
	req := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "retry backoff duration parse deploy"}
	before := ids(find(t, ix, req))

	again := e.index(root, "ws", "app")
	if again.Written != 0 || again.Unchanged != 4 || again.Deleted != 0 {
		t.Fatalf("re-index of an unchanged tree: %s", again)
	}
	if after := ids(find(t, ix, req)); len(after) != len(before) {
		t.Fatalf("ids changed without a change: %v vs %v", before, after)
	} else {
		for k, v := range before {
			if after[k] != v {
				t.Errorf("id of %s changed: %s → %s", k, v, after[k])
			}
		}
	}

	// Change one function of one file: only that file is rewritten, and its
	// untouched function keeps its id.
	write(t, root, "timeutil/duration.go", strings.Replace(mustRead(t, root, "timeutil/duration.go"), "return \"\"", "return \"forever\"", 1))
	changed := e.index(root, "ws", "app")
	if changed.Written != 1 || changed.Unchanged != 3 {
		t.Fatalf("after one edit: %s", changed)
	}
	got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "parse duration string"})
	if got[0].Id != before["timeutil/duration.go:// ParseDuration par"] {
		t.Errorf("the unchanged function's id moved: %v", got[0].Id)
	}
	fmt := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "format duration for humans"})
	if !strings.Contains(fmt[0].Content, "forever") {
		t.Errorf("the edit is not searchable: %q", fmt[0].Content)
	}

	if err := os.Remove(filepath.Join(root, "net/retry.go")); err != nil {
		t.Fatal(err)
	}
	del := e.index(root, "ws", "app")
	if del.Deleted != 1 {
		t.Fatalf("after deleting a file: %s", del)
	}
	for _, h := range find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "retry policy backoff"}) {
		if h.Path == "net/retry.go" {
			t.Fatal("a deleted file is still found")
		}
	}
}

func mustRead(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSecondReplicaRebuildsFromTheStore: a replica started after indexing
// builds its own index from JetStream alone, and both follow later changes.
func TestSecondReplicaRebuildsFromTheStore(t *testing.T) {
	e := newEnv(t)
	root := fixture(t)
	first := e.open()
	e.index(root, "ws", "app")
	second := e.open() // a fresh data dir: nothing local yet
	req := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "exponential backoff retry"}
	a, b := find(t, first, req), find(t, second, req)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("replicas disagree: %v vs %v", paths(a), paths(b))
	}
	for i := range a {
		if a[i].Id != b[i].Id || a[i].Content != b[i].Content {
			t.Fatalf("hit %d differs: %s vs %s", i, a[i].Id, b[i].Id)
		}
	}
	if err := os.Remove(filepath.Join(root, "net/retry.go")); err != nil {
		t.Fatal(err)
	}
	write(t, root, "net/circuit.go", "package net\n\n// CircuitBreaker stops retries after repeated failures.\ntype CircuitBreaker struct{}\n")
	e.index(root, "ws", "app")
	for name, ix := range map[string]*Index{"first": first, "second": second} {
		got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "circuit breaker retries"})
		if len(got) == 0 || got[0].Path != "net/circuit.go" {
			t.Errorf("%s replica did not follow the add: %v", name, paths(got))
		}
		for _, h := range got {
			if h.Path == "net/retry.go" {
				t.Errorf("%s replica did not follow the delete", name)
			}
		}
	}
	// A replica reopened on its data dir catches up without re-indexing.
	dir := t.TempDir()
	ix, err := Open(context.Background(), e.js, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	find(t, ix, req)
	ix.Close()
	ix, err = Open(context.Background(), e.js, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "circuit breaker"}); len(got) == 0 {
		t.Error("reopened replica lost its index")
	}
}

func TestMergeRankBudget(t *testing.T) {
	c := []contracts.RagChunk{
		{Id: "b", Path: "b.go", StartLine: 10, EndLine: 12, Content: "b10\nb11\nb12", Score: 2},
		{Id: "a2", Path: "a.go", StartLine: 4, EndLine: 5, Content: "a4\na5", Score: 1},
		{Id: "a1", Path: "a.go", StartLine: 1, EndLine: 3, Content: "a1\na2\na3", Score: 1},
		{Id: "b2", Path: "b.go", StartLine: 14, EndLine: 15, Content: "b14\nb15", Score: 0.5},
		{Id: "b3", Path: "b.go", StartLine: 11, EndLine: 13, Content: "b11\nb12\nb13", Score: 0.4},
	}
	got := merge(rank(c))
	// b3 extends b to line 13, which then touches b2: all three become one.
	want := []string{"b 10-15 b10\nb11\nb12\nb13\nb14\nb15", "a1 1-5 a1\na2\na3\na4\na5"}
	if len(got) != len(want) {
		t.Fatalf("merged %+v", got)
	}
	for i, g := range got {
		if s := fmt.Sprintf("%s %d-%d %s", g.Id, g.StartLine, g.EndLine, g.Content); s != want[i] {
			t.Errorf("hit %d: %q, want %q", i, s, want[i])
		}
	}
	// The budget skips what does not fit and keeps going with smaller chunks.
	if b := budget(got, 8, 15); len(b) != 1 || b[0].Id != "a1" {
		t.Errorf("budget kept %+v", b)
	}
	if b := budget(got, 1, 1000); len(b) != 1 || b[0].Id != "b" {
		t.Errorf("k=1 kept %+v", b)
	}
}

func TestSpread(t *testing.T) {
	c := []contracts.RagChunk{{Id: "a1", Path: "a.go"}, {Id: "a2", Path: "a.go"}, {Id: "a3", Path: "a.go"}, {Id: "b1", Path: "b.go"}, {Id: "a4", Path: "a.go", Repo: "other"}}
	for _, tt := range []struct {
		perFile int
		want    string
	}{
		{0, "a1 a2 a3 b1 a4"},
		{1, "a1 b1 a4 a2 a3"},
		{2, "a1 a2 b1 a4 a3"},
	} {
		var got []string
		for _, h := range spread(slices.Clone(c), tt.perFile) {
			got = append(got, h.Id)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("spread(%d) = %v, want %s", tt.perFile, got, tt.want)
		}
	}
}
