package retrieval

import (
	"fmt"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func TestShapeOf(t *testing.T) {
	for _, tt := range []struct {
		symbol string
		want   uint8
	}{
		{"func Join", shapeFunc | shapeExported},
		{"func split", shapeFunc},
		{"func (*Server).Serve", shapeMethod | shapeExported},
		{"func (*client).flush", shapeMethod},
		{"type Time", shapeType | shapeExported},
		{"type entry", shapeType},
		{"const", 0},
		{"", 0},
	} {
		if got := shapeOf(tt.symbol); got != tt.want {
			t.Errorf("shapeOf(%q) = %b, want %b", tt.symbol, got, tt.want)
		}
	}
}

func TestFirstSentence(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"Weekday returns the day of the week.\nMore text.\n", "Weekday returns the day of the week"},
		{"Join concatenates. Then more.\n", "Join concatenates"},
		{"Version 1.2 is parsed\nacross lines.\n", "Version 1.2 is parsed\nacross lines"},
		{"First paragraph\n\nSecond.\n", "First paragraph"},
		{"No stop at all\n", "No stop at all\n"},
		{"", ""},
	} {
		if got := firstSentence(tt.in); got != tt.want {
			t.Errorf("firstSentence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRerankerWeighsTheFeatures: a type that many files use, with a long
// doc comment that repeats the question's commonest word, outscores on
// BM25F and uses alone the function whose doc comment's first sentence
// says what was asked; the learned weights put the function first. Without the summary and coverage features (a
// deliberate mutation) the order goes back.
func TestRerankerWeighsTheFeatures(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "clock/time.go", "package clock\n\n// Time is an instant in time. A time is compared with other times; a time has a\n// location, a time zone, a monotonic time reading and a wall time. Times\n// are values: copy a time, never point at a time. The time of a week day.\ntype Time struct{ wall, ext int64 }\n")
	write(t, root, "clock/weekday.go", "package clock\n\n// Weekday returns the day of the week t falls on.\nfunc Weekday(t Time) int { return 0 }\n")
	for i := range 12 { // Time is used
		write(t, root, fmt.Sprintf("filler/f%d.go", i), fmt.Sprintf("package filler\n\nimport \"example.com/clock\"\n\n// F%d waits a while.\nfunc F%d(t clock.Time) {}\n", i, i))
	}
	for i := range 40 { // so that time is not a common word
		write(t, root, fmt.Sprintf("other/o%d.go", i), fmt.Sprintf("package other\n\n// O%d waits a while.\nfunc O%d() {}\n", i, i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	ask := func(w features) string {
		old := SetWeights(func() Weights { v := weights; v.Rerank = w; return v }())
		defer SetWeights(old)
		hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "which day of the week does a time fall on"})
		if len(hits) == 0 {
			t.Fatal("no hits")
		}
		return hits[0].Path
	}
	if got := ask(identityRerank); got != "clock/time.go" {
		t.Fatalf("on BM25F alone %s comes first: the fixture does not test the reranker", got)
	}
	if got := ask(learnedRerank); got != "clock/weekday.go" {
		t.Errorf("learned weights: %s first, want clock/weekday.go", got)
	}
	mutated := learnedRerank
	mutated[fSummary], mutated[fFileSummary], mutated[fAny], mutated[fFileAny], mutated[fContent] = 0, 0, 0, 0, 0
	if got := ask(mutated); got != "clock/time.go" {
		t.Errorf("without the coverage features %s is first: the test does not see them", got)
	}
}

// TestSummaryIsARunOfTheDoc: the summary's terms are the doc field's that
// come from its first sentence, as analysing the sentence alone gives them,
// and a licence header is not a summary.
func TestSummaryIsARunOfTheDoc(t *testing.T) {
	for _, tt := range []struct{ doc, summary string }{
		{"ParseDuration parses a duration string. A duration string is a sequence.\n", "ParseDuration parses a duration string"},
		{"Weekday returns the day of the week t falls on.\n", "Weekday returns the day of the week t falls on"},
		{"No full stop here\nbut two lines\n\nThen a paragraph.\n", "No full stop here\nbut two lines"},
		{"Copyright 2009 The Go Authors. All rights reserved.\nUse of this source code is governed by a BSD-style\nlicense that can be found in the LICENSE file.\nPackage crc32 implements the 32-bit cyclic redundancy check. See more.\n", "Package crc32 implements the 32-bit cyclic redundancy check"},
		{"Copyright 2012-2025 The NATS Authors\nLicensed under the Apache License, Version 2.0 (the \"License\");\n", ""},
		{"SPDX-License-Identifier: MIT\n", ""},
	} {
		if got := summary(tt.doc); got != tt.summary {
			t.Errorf("summary(%q) = %q, want %q", tt.doc, got, tt.summary)
		}
		intern := map[string]string{}
		all, i, j := analyzedSpan(tt.doc, summarySpan(tt.doc), intern)
		want := analyzed(tt.summary, intern)
		if got := all[i:j]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: summary terms %v, want %v", tt.doc, got, want)
		}
	}
}

// TestRerankFeatures reads the features the reranker computes for two
// chunks of a question: the one whose first sentence says the question's
// words in its order, the first of them in its symbol, and one that holds
// two of them the other way round.
func TestRerankFeatures(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "split/words.go", "package split\n\n// Split splits the words of a line.\nfunc Split(s string) []string { return nil }\n")
	write(t, root, "count/count.go", "package count\n\n// Tally takes a line and counts its words.\nfunc Tally(s string) int { return 0 }\n")
	for i := range 10 { // so that no word is common
		write(t, root, fmt.Sprintf("filler/f%d.go", i), fmt.Sprintf("package filler\n\n// F%d does nothing.\nfunc F%d() {}\n", i, i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "x"}) // waits for the index
	if !ix.memReady.Load() {
		t.Fatal("the scoring index is not ready after the bucket's sync")
	}
	got := map[string]features{}
	tracePool = func(file string, f features) { // each file's function, not its package clause
		if _, ok := got[file]; !ok || f[fFunc] == 1 {
			got[file] = f
		}
	}
	defer func() { tracePool = nil }()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "split the words of a line"})
	split, count := got["split/words.go"], got["count/count.go"]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"split: pairs", split[fPairs], 1}, // split→word, word→line of two pairs
		{"split: lead in symbol", split[fLeadSymbol], 1},
		{"split: lead in summary", split[fLeadSummary], 1},
		{"split: all words", split[fAll], 1},
		{"split: summary share", split[fSummary], 1},
		{"split: function", split[fFunc], 1},
		{"split: exported", split[fExported], 1},
		{"count: pairs", count[fPairs], 0}, // line before words: the wrong order
		{"count: lead in symbol", count[fLeadSymbol], 0},
		{"count: lead in summary", count[fLeadSummary], 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s := count[fSummary]; s <= 0 || s >= 1 {
		t.Errorf("count: summary share %v, want between 0 and 1 (line and words, not split)", s)
	}

	groups, idf := ix.termGroups([]string{"configur", "line"}, []expansion{{term: "cfg", from: "configur"}, {term: "ln", from: "line"}})
	if fmt.Sprint(groups) != "[[configur cfg] [line ln]]" || len(idf) != 2 || idf[1] <= 0 {
		t.Errorf("termGroups = %v, %v: want each word with its expansion, and a positive idf", groups, idf)
	}

	hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "split the words of a line"})
	if hits[0].Path != "split/words.go" || hits[0].Score != 1 {
		t.Fatalf("first hit %s scored %v, want split/words.go at 1", hits[0].Path, hits[0].Score)
	}
	var summary []string
	for _, m := range hits[0].Matches {
		if m.Field == "summary" {
			summary = m.Terms
		}
	}
	if fmt.Sprint(summary) != "[line split word]" {
		t.Errorf("explain's summary %v, want [line split word] (%+v)", summary, hits[0].Matches)
	}
}
