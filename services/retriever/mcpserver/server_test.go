package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

const durationGo = `package timeutil

// ParseDuration parses a duration string such as "1h30m" into a time.Duration.
func ParseDuration(s string) (int64, error) {
	return 0, nil
}

// FormatDuration renders a duration for humans.
func FormatDuration(d int64) string {
	return ""
}
`

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

// fixture indexes two repositories of workspace "ws" through the real
// retrieval code (embedded JetStream, chunk store, local bleve index) and
// returns a server over them.
type fixture struct {
	app, cli string // the repositories' roots
	srv      *mcp.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{app: t.TempDir(), cli: t.TempDir()}
	write(t, f.app, "timeutil/duration.go", durationGo)
	write(t, f.app, "net/retry.go", "package net\n\n// RetryPolicy decides how often a failed request is retried with exponential backoff.\n"+
		"type RetryPolicy struct {\n\tMaxAttempts int\n}\n\n// Backoff returns the delay before the given attempt.\nfunc (p RetryPolicy) Backoff(attempt int) int { return attempt * 2 }\n")
	write(t, f.app, "scripts/deploy.py", "def deploy_service(name):\n    \"\"\"Roll out a service to the cluster, retrying on failure.\"\"\"\n    return name\n")
	write(t, f.app, "README.md", "# App\n\nParses durations and retries requests.\n")
	write(t, f.app, ".gitignore", "secret/\n")
	write(t, f.app, "secret/keys.go", "package secret\n\nconst Key = \"parse duration\"\n") // on disk, not indexed
	var long strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&long, "value_%04d = %d  # line %d of a long generated-looking table\n", i, i, i)
	}
	write(t, f.app, "data/table.py", long.String())
	write(t, f.app, "data/wide.py", strings.Repeat("wide_value = '"+strings.Repeat("w", 300)+"'\n", 400))
	write(t, f.cli, "cmd/flags.go", "package cmd\n\n// parseDurationFlag parses a duration flag for the command line.\nfunc parseDurationFlag(s string) {}\n")
	write(t, f.cli, "README.md", "# CLI\n\nThe command line.\n")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := natstest.JetStream(t)
	for repo, root := range map[string]string{"app": f.app, "cli": f.cli} {
		if _, err := retrieval.IndexDir(ctx, js, root, retrieval.IndexOptions{Workspace: "ws", Repo: repo}); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: t.TempDir(), K: MaxK, MaxChars: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(ctx, js, ix)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = New(src, Options{Workspace: "ws"})
	return f
}

// inMemory connects a go-sdk client to srv over in-memory transports.
func inMemory(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return connect(t, ct)
}

// overHTTP connects a go-sdk client to srv served by the streamable HTTP handler.
func overHTTP(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return connect(t, &mcp.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true})
}

func connect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool; a protocol error fails the test, a tool error does not.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content into out.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return out
}

func wantToolError(t *testing.T, res *mcp.CallToolResult, contains string) {
	t.Helper()
	if !res.IsError {
		t.Errorf("want a tool error containing %q, got success: %.300s", contains, text(res))
		return
	}
	if !strings.Contains(text(res), contains) {
		t.Errorf("tool error %q does not say %q", text(res), contains)
	}
}

func TestToolsOverBothTransports(t *testing.T) {
	f := newFixture(t)
	for name, open := range map[string]func(*testing.T, *mcp.Server) *mcp.ClientSession{"in-memory": inMemory, "streamable HTTP": overHTTP} {
		t.Run(name, func(t *testing.T) {
			cs := open(t, f.srv)
			checkToolList(t, cs)
			checkSearchFindsFunction(t, cs)
			checkReadLines(t, cs, f.app)
			wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "../../etc/passwd"}), `".." is not allowed`)
		})
	}
}

func checkToolList(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // tool → required arguments
		"search_code":     {"query"},
		"read_file_lines": {"path"},
		"list_repos":      nil,
	}
	props := map[string][]string{
		"search_code":     {"query", "repo", "language", "k", "workspace"},
		"read_file_lines": {"path", "start", "end", "repo", "workspace"},
		"list_repos":      {"workspace"},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("tools/list has %d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		req, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if tool.Description == "" || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s: want a description and a read-only annotation", tool.Name)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		var schema struct {
			Type       string
			Required   []string
			Properties map[string]struct{ Type, Description string }
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		slices.Sort(schema.Required)
		if schema.Type != "object" || !slices.Equal(schema.Required, req) {
			t.Errorf("%s: schema type %q, required %v, want object with %v", tool.Name, schema.Type, schema.Required, req)
		}
		for _, p := range props[tool.Name] {
			if schema.Properties[p].Description == "" {
				t.Errorf("%s: argument %s missing or without a description: %s", tool.Name, p, raw)
			}
		}
	}
}

func checkSearchFindsFunction(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res := call(t, cs, "search_code", map[string]any{"query": "parse a duration string"})
	out := structured[SearchOutput](t, res)
	if len(out.Chunks) == 0 {
		t.Fatalf("no chunks: %s", text(res))
	}
	top := out.Chunks[0]
	if top.Path != "timeutil/duration.go" || top.Repo != "app" || top.StartLine != 3 || top.EndLine != 6 || top.Language != "Go" ||
		!strings.HasPrefix(top.Id, "ck_") || top.Score <= 0 || !strings.Contains(top.Content, "func ParseDuration(s string)") {
		t.Errorf("top chunk %+v", top)
	}
	if out.Workspace != "ws" {
		t.Errorf("workspace %q, want the server's default ws", out.Workspace)
	}
	for _, want := range []string{"timeutil/duration.go:3-6", top.Id, "func ParseDuration", "repo app", "score "} {
		if !strings.Contains(text(res), want) {
			t.Errorf("readable text lacks %q:\n%s", want, text(res))
		}
	}
}

func checkReadLines(t *testing.T, cs *mcp.ClientSession, root string) {
	t.Helper()
	res := call(t, cs, "read_file_lines", map[string]any{"path": "timeutil/duration.go", "start": 3, "end": 6})
	out := structured[ReadOutput](t, res)
	want := "     3\t// ParseDuration parses a duration string such as \"1h30m\" into a time.Duration.\n" +
		"     4\tfunc ParseDuration(s string) (int64, error) {\n     5\t\treturn 0, nil\n     6\t}\n"
	if out.Text != want || out.StartLine != 3 || out.EndLine != 6 || out.TotalLines != 11 || out.Repo != "app" || out.Truncated {
		t.Errorf("read 3-6: %+v\nwant text %q", out, want)
	}
	if !strings.Contains(text(res), want) || !strings.Contains(text(res), "lines 3-6 of 11") {
		t.Errorf("readable text: %q", text(res))
	}
}

func TestSearchCodeKAndFilters(t *testing.T) {
	f := newFixture(t)
	cs := inMemory(t, f.srv)
	search := func(args map[string]any) []Chunk {
		t.Helper()
		return structured[SearchOutput](t, call(t, cs, "search_code", args)).Chunks
	}
	all := search(map[string]any{"query": "duration retry deploy service parse backoff", "k": MaxK})
	if len(all) < 4 {
		t.Fatalf("a broad query found only %d chunks", len(all))
	}
	if got := search(map[string]any{"query": "duration retry deploy service parse backoff"}); len(got) != min(DefaultK, len(all)) {
		t.Errorf("default k gave %d chunks of %d", len(got), len(all))
	}
	if got := search(map[string]any{"query": "duration retry deploy service parse backoff", "k": 2}); len(got) != 2 || got[0].Id != all[0].Id || got[1].Id != all[1].Id {
		t.Errorf("k=2 gave %d chunks, want the first 2 of %d", len(got), len(all))
	}
	if got := search(map[string]any{"query": "duration retry deploy service parse backoff", "k": 500}); len(got) != len(all) {
		t.Errorf("k=500 (clamped to %d) gave %d chunks, want %d", MaxK, len(got), len(all))
	}
	if got := search(map[string]any{"query": "duration retry deploy service parse", "language": "python"}); len(got) == 0 {
		t.Error("language filter: no hits")
	} else {
		for _, c := range got {
			if c.Language != "Python" {
				t.Errorf("language python: got %s (%s)", c.Path, c.Language)
			}
		}
	}
	got := search(map[string]any{"query": "parse duration", "repo": "cli"})
	if len(got) == 0 {
		t.Error("repo filter: no hits")
	}
	for _, c := range got {
		if c.Repo != "cli" {
			t.Errorf("repo cli: got %s of repo %s", c.Path, c.Repo)
		}
	}
	if got := search(map[string]any{"query": "parse duration", "workspace": "nobody"}); len(got) != 0 {
		t.Errorf("another workspace found %d chunks", len(got))
	}
	res := call(t, cs, "search_code", map[string]any{"query": "zzyzx quuxplatz"})
	if res.IsError || !strings.Contains(text(res), "No chunks match") {
		t.Errorf("no hits should be a plain answer: %s", text(res))
	}
	wantToolError(t, call(t, cs, "search_code", map[string]any{"query": "  "}), "query is empty")
	wantToolError(t, call(t, cs, "search_code", map[string]any{"query": "x", "k": -1}), "k -1")
	wantToolError(t, call(t, cs, "search_code", map[string]any{"query": "x", "repo": "a.>"}), `repo "a.>"`)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_code", Arguments: map[string]any{"repo": "app"}}); err == nil && !res.IsError {
		t.Error("a call without the required query succeeded")
	}
}

func TestReadFileLines(t *testing.T) {
	f := newFixture(t)
	cs := inMemory(t, f.srv)
	read := func(args map[string]any) ReadOutput {
		t.Helper()
		return structured[ReadOutput](t, call(t, cs, "read_file_lines", args))
	}

	// The whole file, rebuilt from the stored chunks, is the file on disk.
	whole := read(map[string]any{"path": "./timeutil/duration.go"})
	var want strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(durationGo, "\n"), "\n") {
		fmt.Fprintf(&want, "%6d\t%s\n", i+1, l)
	}
	if whole.Text != want.String() || whole.StartLine != 1 || whole.EndLine != 11 || whole.Path != "timeutil/duration.go" {
		t.Errorf("whole file:\n%s\nwant:\n%s", whole.Text, want.String())
	}
	if got := read(map[string]any{"path": "timeutil/duration.go", "start": 9, "end": 500}); got.StartLine != 9 || got.EndLine != 11 || got.Truncated {
		t.Errorf("end past the file: %+v", got)
	}

	// Caps: 400 lines, then 64 KiB, each said.
	long := call(t, cs, "read_file_lines", map[string]any{"path": "data/table.py"})
	if got := structured[ReadOutput](t, long); got.EndLine != MaxReadLines || !got.Truncated || got.TotalLines != 1000 ||
		!strings.Contains(got.Text, "   400\tvalue_0400 = 400") || strings.Contains(got.Text, "value_0401") {
		t.Errorf("long file: lines %d-%d of %d, truncated %v", got.StartLine, got.EndLine, got.TotalLines, got.Truncated)
	}
	if !strings.Contains(text(long), "continue with start=401") {
		t.Errorf("truncation not said: %.200s", text(long)[len(text(long))-200:])
	}
	if got := read(map[string]any{"path": "data/table.py", "start": 990, "end": 1200}); got.EndLine != 1000 || got.Truncated {
		t.Errorf("the last lines: %d-%d truncated %v", got.StartLine, got.EndLine, got.Truncated)
	}
	wide := read(map[string]any{"path": "data/wide.py", "start": 1, "end": 400})
	if len(wide.Text) > MaxReadBytes || !wide.Truncated || wide.EndLine >= 400 || wide.EndLine < 100 {
		t.Errorf("wide file: %d bytes, lines %d-%d, truncated %v", len(wide.Text), wide.StartLine, wide.EndLine, wide.Truncated)
	}

	// A path in two repositories needs repo.
	wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "README.md"}), "several repositories of workspace ws (app, cli)")
	if got := read(map[string]any{"path": "README.md", "repo": "cli"}); !strings.Contains(got.Text, "# CLI") || got.Repo != "cli" {
		t.Errorf("README of cli: %+v", got)
	}

	// Only indexed files, whatever the path names.
	for path, says := range map[string]string{
		"../../etc/passwd":             `".." is not allowed`,
		"timeutil/../../../etc/passwd": `".." is not allowed`,
		"/etc/passwd":                  "relative to the repository root",
		"secret/keys.go":               "not an indexed file of workspace ws", // on disk under the root, gitignored
		"nope.go":                      "not an indexed file",
		"":                             "path is empty",
		filepath.Join(f.app, "timeutil/duration.go"): "relative to the repository root",
	} {
		wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": path}), says)
	}
	wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "timeutil/duration.go", "repo": "cli"}), "not an indexed file of workspace ws, repo cli")
	wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "timeutil/duration.go", "start": 12}), "has 11 lines")
	wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "timeutil/duration.go", "start": 5, "end": 4}), "end >= start")
	wantToolError(t, call(t, cs, "read_file_lines", map[string]any{"path": "timeutil/duration.go", "workspace": "other"}), "not an indexed file of workspace other")
}

func TestListRepos(t *testing.T) {
	f := newFixture(t)
	cs := inMemory(t, f.srv)
	out := structured[ReposOutput](t, call(t, cs, "list_repos", nil))
	want := []Repo{{Workspace: "ws", Repo: "app", Files: 6}, {Workspace: "ws", Repo: "cli", Files: 2}}
	if !slices.Equal(out.Repos, want) || out.DefaultWorkspace != "ws" {
		t.Errorf("list_repos: %+v, want %+v", out, want)
	}
	if got := structured[ReposOutput](t, call(t, cs, "list_repos", map[string]any{"workspace": "nobody"})); len(got.Repos) != 0 {
		t.Errorf("unknown workspace: %+v", got.Repos)
	}
}

// notReady is a Source whose index is still loading.
type notReady struct{ Source }

func (notReady) Search(context.Context, contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
	return contracts.Retrieval{}, retrieval.ErrNotReady
}

type failing struct{ Source }

func (failing) Search(context.Context, contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
	return contracts.Retrieval{}, errors.New("nats: timeout")
}

func TestSearchErrorsAreToolErrors(t *testing.T) {
	cs := inMemory(t, New(notReady{}, Options{}))
	wantToolError(t, call(t, cs, "search_code", map[string]any{"query": "anything"}), "still loading")
	cs = inMemory(t, New(failing{}, Options{}))
	wantToolError(t, call(t, cs, "search_code", map[string]any{"query": "anything"}), "search failed: nats: timeout")
}
