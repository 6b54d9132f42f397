package retrieval

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func TestSubsequence(t *testing.T) {
	for _, tt := range []struct {
		a, w string
		want bool
	}{
		{"dir", "directori", true},
		{"cfg", "configur", true},
		{"ack", "acknowledg", true},
		{"msg", "messag", true},
		{"gsm", "messag", false},
		{"", "x", true},
		{"long", "lo", false},
	} {
		if got := subsequence(tt.a, tt.w); got != tt.want {
			t.Errorf("subsequence(%q, %q) = %v", tt.a, tt.w, got)
		}
	}
}

// TestAbbreviationsLearnedFromSymbols: identifiers that write cfg for
// configuration teach the index that a question about configuration may
// mean them; the chunk found that way says so in its matches.
func TestAbbreviationsLearnedFromSymbols(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "conf/load.go", "package conf\n\n// loadCfg reads the file.\nfunc loadCfg() {}\n\n// saveCfg writes the configuration.\nfunc saveCfg() {}\n\n// mergeCfg merges two configurations.\nfunc mergeCfg() {}\n\n// checkCfg checks a configuration.\nfunc checkCfg() {}\n")
	// cog keeps the letters of configuration in order too, but its doc
	// comments never speak of one: it is not taken for an abbreviation.
	write(t, root, "other/gear.go", "package other\n\n// Configure sets the gears up.\nfunc Configure() {}\n\n// cogSpin spins a gear, no configuration.\nfunc cogSpin() {}\n\n// cogStop stops a gear.\nfunc cogStop() {}\n\n// cogTurn turns a gear.\nfunc cogTurn() {}\n")
	e.index(root, "ws", "app")
	ix := e.open()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "x"}) // waits for the index

	got, err := ix.abbreviations("configur")
	if err != nil || !slices.Equal(got, []string{"cfg"}) {
		t.Fatalf("abbreviations(configur) = %v, %v; want [cfg]", got, err)
	}
	if got, _ := ix.abbreviations("file"); got != nil {
		t.Errorf("a short term got abbreviations %v", got)
	}
	hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "reads the configuration"})
	i := slices.IndexFunc(hits, func(c contracts.RagChunk) bool { return c.Path == "conf/load.go" && c.StartLine == 3 })
	if i < 0 {
		t.Fatalf("loadCfg not found: %v", paths(hits))
	}
	var sym *contracts.RagMatch
	for _, m := range hits[i].Matches {
		if m.Field == "symbol" {
			sym = &m
		}
	}
	if sym == nil || !slices.Equal(sym.Terms, []string{"cfg"}) || !slices.Equal(sym.Expanded, []string{"cfg"}) {
		t.Errorf("loadCfg's matches %+v: want symbol[cfg] marked as an expansion", hits[i].Matches)
	}
}

// TestPackageDocFavoursItsPackage: a question in the words of a package's
// doc comment finds that package's declarations, though they never repeat
// those words, ahead of a declaration elsewhere that shares one of them.
func TestPackageDocFavoursItsPackage(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "crcx/doc.go", "// Copyright 2026 The Authors.\n\n// Package crcx implements the cyclic redundancy check used by tape drives.\npackage crcx\n")
	write(t, root, "crcx/sum.go", "package crcx\n\n// Sum returns the checksum of data.\nfunc Sum(data []byte) uint32 { return 0 }\n")
	write(t, root, "other/check.go", "package other\n\n// Check checks the data.\nfunc Check(data []byte) bool { return true }\n")
	for i := range 10 { // so that check and data are not common words
		write(t, root, fmt.Sprintf("filler/f%d.go", i), fmt.Sprintf("package filler\n\n// F%d does nothing.\nfunc F%d() {}\n", i, i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	for _, tt := range []struct {
		pkg  float64
		want string
	}{{0, "other/check.go"}, {5, "crcx/sum.go"}} {
		// The package bonus as the score has it (the reranker weighs the
		// score with other features: TestRerankerWeighsTheFeatures).
		old := SetWeights(func() Weights { w := weights; w.Package = tt.pkg; w.Rerank, w.Forest = identityRerank, nil; return w }())
		hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "check data for a cyclic redundancy"})
		SetWeights(old)
		i := slices.IndexFunc(hits, func(c contracts.RagChunk) bool { return c.Path != "crcx/doc.go" })
		if i < 0 || hits[i].Path != tt.want {
			t.Errorf("package boost %v: first declaration %v, want %s", tt.pkg, paths(hits), tt.want)
		}
	}
}

func TestLeadingCommentAndKind(t *testing.T) {
	for _, tt := range []struct {
		lang, content, comment, kind string
	}{
		{"Go", "// Sum adds.\n//\n// It wraps.\nfunc Sum() {}\n", "Sum adds.\n\nIt wraps.\n", ""},
		{"Go", "// Copyright x.\n\n// Package p does y.\npackage p\n", "Copyright x.\nPackage p does y.\n", kindPackageDoc},
		{"Go", "// Package p does y.\npackage p\n", "Package p does y.\n", kindPackageDoc},
		{"Go", "func f() {}\n// later\n", "", ""},
		{"Markdown", "## Retry policy\n\ntext\n", "", ""},
		{"Shell", "# deploy the app\nset -e\n", "deploy the app\n", ""},
	} {
		c := leadingComment(tt.lang, tt.content)
		if c != tt.comment || kind(tt.lang, c, tt.content) != tt.kind {
			t.Errorf("%s %q: comment %q kind %q, want %q %q", tt.lang, tt.content, c, kind(tt.lang, c, tt.content), tt.comment, tt.kind)
		}
	}
}

// TestSoleWorkspace: the workspace filter is left out only while the index
// holds that one workspace; a second one brings it back.
func TestSoleWorkspace(t *testing.T) {
	e := newEnv(t)
	a, b := t.TempDir(), t.TempDir()
	write(t, a, "a.go", "package a\n\n// Parse parses.\nfunc Parse() {}\n")
	write(t, b, "b.go", "package b\n\n// Parse parses too.\nfunc Parse() {}\n")
	e.index(a, "one", "r")
	ix := e.open()
	if hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "one", Instruction: "parse"}); len(hits) != 1 {
		t.Fatalf("one workspace: %v", paths(hits))
	}
	if sole, err := ix.soleWorkspace(); err != nil || sole != "one" {
		t.Fatalf("soleWorkspace = %q, %v; want one", sole, err)
	}
	e.index(b, "two", "r")
	for ws, want := range map[string]string{"one": "a.go", "two": "b.go"} {
		hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: ws, Instruction: "parse"})
		if len(hits) != 1 || hits[0].Path != want {
			t.Errorf("workspace %s: %v, want only %s", ws, paths(hits), want)
		}
	}
	if sole, _ := ix.soleWorkspace(); sole != "" {
		t.Errorf("two workspaces, soleWorkspace = %q", sole)
	}
}

// TestAbbreviationsAreNamesNotText: a learned abbreviation is looked up in
// the names, doc comments and paths it was learned from, not in the text of
// every chunk that uses a variable so named (cfg, buf and str are written in
// the bodies of thousands of functions that are not about configuration,
// buffers or strings), and the chunk's matches say what was looked up.
func TestAbbreviationsAreNamesNotText(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "conf/load.go", "package conf\n\n// loadCfg reads the file.\nfunc loadCfg() {}\n\n// saveCfg writes the configuration.\nfunc saveCfg() {}\n\n// mergeCfg merges two configurations.\nfunc mergeCfg() {}\n\n// checkCfg checks a configuration.\nfunc checkCfg() {}\n")
	write(t, root, "run/run.go", "package run\n\n// Start starts the engine.\nfunc Start() {\n\tcfg := 1\n\t_ = cfg\n}\n")
	e.index(root, "ws", "app")
	ix := e.open()
	hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "reads the configuration"})
	if slices.ContainsFunc(hits, func(c contracts.RagChunk) bool { return c.Path == "run/run.go" }) {
		t.Errorf("a body that only uses a variable named cfg was found: %v", paths(hits))
	}
	for _, h := range hits {
		for _, m := range h.Matches {
			if m.Field == "content" && len(m.Expanded) > 0 {
				t.Errorf("%s: content matches list expansions %v, which are not looked up there", h.Path, m.Expanded)
			}
		}
	}
}

// TestPathFactor: tests, tool sources and packages no user can import
// (internal/, vendor/) rank below library code unless the question asks
// for them.
func TestPathFactor(t *testing.T) {
	lib := pathFactor("crypto/sha256/sha256.go", false, false)
	for _, p := range []string{
		"crypto/internal/fips140/sha256/sha256.go", "internal/bytealg/index.go", "vendor/golang.org/x/net/http2/frame.go",
		"crypto/sha256/sha256_test.go", "cmd/go/main.go",
	} {
		if f := pathFactor(p, false, false); f >= lib {
			t.Errorf("pathFactor(%s) = %v, not below library code's %v", p, f, lib)
		}
	}
	for _, p := range []string{"internal.go", "net/http/internal.go", "pkg/internals/x.go"} {
		if f := pathFactor(p, false, false); f != lib {
			t.Errorf("pathFactor(%s) = %v: not an internal package", p, f)
		}
	}
	if a, b := pathFactor("cmd/internal/obj/link.go", false, true), pathFactor("cmd/internal/obj/link.go", false, false); a <= b {
		t.Errorf("a question about tools lifts the tool factor: %v, %v", a, b)
	}
}

func TestShapedLike(t *testing.T) {
	for _, c := range []struct {
		a, w string
		ok   bool
	}{
		{"str", "string", true},   // the start of the word
		{"num", "number", true},   // idem, a vowel in it
		{"cfg", "configur", true}, // first letter, then consonants
		{"msg", "messag", true},
		{"ctx", "context", true},
		{"sig", "string", false}, // letters in order, not an abbreviation
		{"than", "toolchain", false},
		{"pin", "pointer", false},
	} {
		if got := shapedLike(c.a, c.w); got != c.ok {
			t.Errorf("shapedLike(%q, %q) = %v, want %v", c.a, c.w, got, c.ok)
		}
	}
}
