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
		{"func (c *client).flush", shapeMethod},
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

// TestSummaryLeadsTheDoc: the summary's terms are the doc field's that come
// from its first sentence, as analysing the sentence alone gives them.
func TestSummaryLeadsTheDoc(t *testing.T) {
	for _, doc := range []string{
		"ParseDuration parses a duration string. A duration string is a sequence.\n",
		"Weekday returns the day of the week t falls on.\n",
		"No full stop here\nbut two lines\n\nThen a paragraph.\n",
	} {
		intern := map[string]string{}
		all, n := analyzedUpTo(doc, len(firstSentence(doc)), intern)
		want := analyzed(firstSentence(doc), intern)
		if got := all[:n]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: summary %v, want %v", doc, got, want)
		}
	}
}
