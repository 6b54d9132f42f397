package sandbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// benchBody is a turn as the envelope builds it: a system message, a user
// message whose [MODE]/[INSTRUCTION] part comes first and whose ~10 KB
// [CONTEXT] part holds 8 code chunks, and 6 function tools.
func benchBody(tb testing.TB) []byte {
	tb.Helper()
	var ctx strings.Builder
	ctx.WriteString("[CONTEXT]\n")
	for n := 1; n <= 8; n++ {
		fmt.Fprintf(&ctx, "\n=== CHUNK %d ===\nId: chunk-%04d\nPath: services/example/file%d.go\nLines: 10-48\nLanguage: go\n```go\n", n, n, n)
		for l := 0; l < 14; l++ {
			fmt.Fprintf(&ctx, "\tif err := step%d(ctx, \"value %d\"); err != nil { return fmt.Errorf(\"step: %%w\", err) }\n", l, n*l)
		}
		ctx.WriteString("```\n")
	}
	tools := make([]map[string]any, 0, 6)
	for _, name := range []string{"search_code", "read_file", "list_dir", "run_tests", "git_diff", "open_issue"} {
		tools = append(tools, map[string]any{"type": "function", "name": name, "description": "Sandbox benchmark tool " + name + ".",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"path":  map[string]any{"type": "string", "description": "A repository path."},
				"limit": map[string]any{"type": "integer", "minimum": 1},
			}, "required": []string{"path"}, "additionalProperties": false}, "strict": true})
	}
	text := func(role string, texts ...string) map[string]any {
		parts := make([]map[string]string, 0, len(texts))
		for _, t := range texts {
			parts = append(parts, map[string]string{"type": "input_text", "text": t})
		}
		return map[string]any{"type": "message", "role": role, "content": parts}
	}
	body, err := json.Marshal(map[string]any{
		"model": "sandbox",
		"input": []any{
			text("system", "You are a careful code assistant. Answer from the context; cite chunk ids."),
			text("user", "[MODE: ANALYZE]\n\n[INSTRUCTION]\nExplain how the steps report their errors.", ctx.String()),
		},
		"tools": tools,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if n := ctx.Len(); n < 9<<10 || n > 12<<10 {
		tb.Fatalf("context is %d bytes, want ~10 KB", n)
	}
	return body
}

// BenchmarkCreate is the cost of one POST /v1/responses with a realistic
// turn, served in-process. The server is renewed every 1000 requests so the
// stored responses do not grow the heap the benchmark measures.
func BenchmarkCreate(b *testing.B) {
	body := benchBody(b)
	newServer := func() *sandbox.Server { return sandbox.New(sandbox.Options{Logger: slog.New(slog.DiscardHandler)}) }
	srv := newServer()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "chunk-0008") {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n++; n%1000 == 0 {
			b.StopTimer()
			srv = newServer()
			b.StartTimer()
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
