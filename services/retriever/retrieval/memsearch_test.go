package retrieval

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"

	index "github.com/blevesearch/bleve_index_api"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// engineFixture writes a small module with package docs, tests, a command,
// an internal package and abbreviated names: every rule of the ranking has
// something to act on.
func engineFixture(t *testing.T) string {
	root := t.TempDir()
	write(t, root, "config/doc.go", "// Copyright 2026.\n\n// Package config loads and reloads the server configuration from a file.\npackage config\n")
	write(t, root, "config/load.go", "package config\n\n// LoadCfg reads the configuration file at path.\nfunc LoadCfg(path string) (*Cfg, error) { return nil, nil }\n\n// Cfg is the configuration.\ntype Cfg struct{ Dir string }\n\n// ReloadCfg reloads the configuration when the file changes.\nfunc ReloadCfg(c *Cfg) error { return nil }\n")
	write(t, root, "config/load_test.go", "package config\n\nimport \"testing\"\n\n// TestLoadCfg loads a configuration file.\nfunc TestLoadCfg(t *testing.T) { LoadCfg(\"x\") }\n")
	write(t, root, "cmd/tool/main.go", "// Command tool reloads configuration files.\npackage main\n\nfunc main() { reloadConfigFile() }\n\n// reloadConfigFile reloads the configuration file.\nfunc reloadConfigFile() {}\n")
	write(t, root, "internal/msg/doc.go", "// Package msg encodes and decodes messages on the wire.\npackage msg\n")
	write(t, root, "internal/msg/msg.go", "package msg\n\n// EncodeMsg encodes a message with its header.\nfunc EncodeMsg(m []byte) []byte { return m }\n\n// DecodeMsg decodes a message and checks its header.\nfunc DecodeMsg(b []byte) []byte { return b }\n")
	write(t, root, "wire/message.go", "package wire\n\n// Message is a message sent on the wire, its header first.\ntype Message struct{ Header, Body []byte }\n\n// Send writes the message to the connection.\nfunc (m Message) Send() error { return nil }\n")
	write(t, root, "README.md", "# Server\n\nThe server reloads its configuration file on SIGHUP.\n\n## Messages\n\nMessages carry a header and a body.\n")
	for i := range 12 {
		write(t, root, fmt.Sprintf("util/u%d.go", i), fmt.Sprintf("package util\n\n// Helper%d does a small thing with a file, message %d.\nfunc Helper%d() {}\n", i, i, i))
	}
	return root
}

// TestScoringIndexMatchesBleve: the scoring index ranks and scores as the
// bleve query it replaces, given bleve's average field lengths, over
// questions, scopes, filters and boosts.
func TestScoringIndexMatchesBleve(t *testing.T) {
	e := newEnv(t)
	e.index(engineFixture(t), "ws", "app")
	e.index(engineFixture(t), "ws", "lib")
	ix := e.open()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "sync"})
	if !ix.memReady.Load() {
		t.Fatal("the scoring index has not loaded the bucket after WaitSynced")
	}
	r, err := ix.reader()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := r.DocCount()
	memAvgLength = func(field string) float64 {
		c, err := r.(index.BM25Reader).FieldCardinality(field)
		if err != nil {
			t.Fatal(err)
		}
		return math.Ceil(float64(c) / float64(n))
	}
	defer func() { memAvgLength = nil; r.Close() }()
	if got := int(n); got != ix.mem.Len() {
		t.Fatalf("bleve holds %d chunks, the scoring index %d", got, ix.mem.Len())
	}
	reqs := []contracts.AgentExecuteRequest{
		{Instruction: "reload the configuration file"},
		{Instruction: "decode a message header"},
		{Instruction: "test that loads the configuration"},
		{Instruction: "send a message on the wire", Repo: "lib"},
		{Instruction: "send a message on the wire", Repo: "lib", RagScope: contracts.RagScopeRepo},
		{Instruction: "configuration helper file message", Language: "go"},
		{Instruction: "configuration file", Mode: "debug reload"},
		{Instruction: "message header", ActiveFiles: []string{"wire/message.go"}},
		{Instruction: "nothing matches zzz"},
	}
	// The settings that change the query's shape: an abbreviation in its
	// word's clause (weights.Group, the default) or a clause of its own,
	// related words (a weight of their own), expansions in the text. (Not
	// weights.Nested false: two identical chunks of two repos then tie, and
	// the engines' sums differ in the last bit, which orders the tie.)
	base := weights
	defer func() { weights = base }()
	settings := []struct {
		name string
		set  func(w *Weights)
	}{
		{"default", func(w *Weights) {}},
		{"ungrouped", func(w *Weights) { w.Group = false }},
		{"related", func(w *Weights) { w.Related = 0.3; w.RelatedLift = 2 }},
		{"expand text", func(w *Weights) { w.ExpandText = true }},
	}
	expanded := 0 // requests whose words have an expansion: Group has something to group
	for _, req := range reqs {
		if len(ix.Expansions(req.Instruction)) > 0 {
			expanded++
		}
	}
	if expanded < 2 {
		t.Fatalf("%d requests have an expansion: the fixture does not test grouping", expanded)
	}
	for _, st := range settings {
		w := base
		// bleve normalises lengths by its own figure (memAvgLength above
		// gives the scoring index the same), not by the mean; and only
		// the scoring index counts uses (TestUsageRanksTheUsedFirst).
		w.MeanLength = false
		w.Coord, w.IDF, w.K1, w.B = 0, 0, 0, 0   // bleve's BM25 and coordination
		w.Usage, w.Pool = 0, 1                   // bleve applies the path factor to the hits it keeps
		w.Rerank, w.Forest = identityRerank, nil // and does not rerank
		w.Platform = 0                           // nor read the platforms a question names
		st.set(&w)
		weights = w
		compareEngines(t, ix, st.name, reqs)
	}
	ix.memReady.Store(true)
}

// compareEngines runs each request on bleve and on the scoring index and
// fails on any difference of chunk, score (beyond 1e-9), text or matches.
func compareEngines(t *testing.T, ix *Index, setting string, reqs []contracts.AgentExecuteRequest) {
	t.Helper()
	for _, req := range reqs {
		req.WorkspaceId = "ws"
		search := func(mem bool) contracts.Retrieval {
			ix.memReady.Store(mem)
			ix.ResetCaches()
			res, err := ix.Search(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		want, got := search(false), search(true)
		if len(want.Chunks) == 0 && req.Instruction != "nothing matches zzz" {
			t.Errorf("%s %q: bleve found nothing: the fixture does not test it", setting, req.Instruction)
		}
		if len(got.Chunks) != len(want.Chunks) {
			t.Errorf("%s %+v: scoring index returned %d chunks, bleve %d", setting, req, len(got.Chunks), len(want.Chunks))
			continue
		}
		for i := range want.Chunks {
			w, g := want.Chunks[i], got.Chunks[i]
			if w.Id != g.Id || math.Abs(w.Score-g.Score) > 1e-9*math.Abs(w.Score) || w.Content != g.Content || w.StartLine != g.StartLine {
				t.Errorf("%s %q rank %d: scoring index %s:%d %.12f, bleve %s:%d %.12f", setting, req.Instruction, i+1, g.Path, g.StartLine, g.Score, w.Path, w.StartLine, w.Score)
			}
			if !reflect.DeepEqual(w.Matches, g.Matches) {
				t.Errorf("%s %q rank %d (%s:%d): scoring index explains %+v, bleve's analysis %+v", setting, req.Instruction, i+1, g.Path, g.StartLine, g.Matches, w.Matches)
			}
		}
	}
}

// TestUsageRanksTheUsedFirst: of two declarations a question matches
// alike, the one the rest of the code uses ranks first, and only while
// uses count (weights.Usage); a use added by re-indexing another file
// moves the count, and deleting it moves it back.
func TestUsageRanksTheUsedFirst(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "alpha/alpha.go", "package alpha\n\n// Merge joins two sorted lists into one sorted list.\nfunc Merge(a, b []int) []int { return nil }\n")
	write(t, root, "beta/beta.go", "package beta\n\n// Merge joins two sorted lists into one sorted list.\nfunc Merge(a, b []int) []int { return nil }\n")
	for i := range 4 {
		write(t, root, fmt.Sprintf("app/use%d.go", i), fmt.Sprintf("package app\n\nimport \"x/beta\"\n\nfunc use%d() { beta.Merge(nil, nil) }\n", i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	if err := ix.WaitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "join two sorted lists"}
	top := func() string {
		t.Helper()
		res, err := ix.Search(context.Background(), req)
		if err != nil || len(res.Chunks) == 0 {
			t.Fatalf("search: %v, %d chunks", err, len(res.Chunks))
		}
		return res.Chunks[0].Path
	}
	base := weights
	defer func() { weights = base }()
	weights.Usage = 0
	if got := top(); got != "alpha/alpha.go" { // equal scores: ties go by path
		t.Fatalf("without uses the first is %s, want the tie's first, alpha/alpha.go", got)
	}
	weights.Usage = base.Usage
	if got := top(); got != "beta/beta.go" {
		t.Fatalf("the used Merge is not first: %s", got)
	}
	if res, _ := ix.Search(context.Background(), req); res.Chunks[0].Uses != 4 {
		t.Fatalf("beta.Merge is used by %v chunks, want 4 (shown with the chunk)", res.Chunks[0].Uses)
	}
	for i := range 8 { // alpha.Merge used more than beta.Merge now
		write(t, root, fmt.Sprintf("app/alpha%d.go", i), fmt.Sprintf("package app\n\nimport \"x/alpha\"\n\nfunc alpha%d() { alpha.Merge(nil, nil) }\n", i))
	}
	e.index(root, "ws", "app")
	if err := ix.WaitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := top(); got != "alpha/alpha.go" {
		t.Fatalf("after alpha.Merge gained uses the first is %s", got)
	}
}
