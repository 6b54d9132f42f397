package retrieval

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestNearestJoinsThePool: a chunk that holds a question's word only in
// its body, below thirty that hold it in their names and doc comments,
// is cut from the pool BM25F fills (20 hits for K = 1); what it does is
// said in other words, by its doc comment or, without one, by its code
// (chunkVector: a vector of the doc comment alone would give it no
// place), so the nearest-chunk search brings it back (weights.Near) with
// its rank by meaning. Every chunk of art/tree.go holds "tree" in its
// path, so far more than Near chunks are touched: fewer, and every one
// with a vector would join.
func TestNearestJoinsThePool(t *testing.T) {
	for _, purge := range []string{
		"package fs\n\n// Purge deletes a folder and everything inside it.\nfunc Purge(name string) {\n\twalk(name) // the whole tree\n}\n",
		"package fs\n\nfunc Purge(folder string) {\n\twipeRecursively(folder) // the whole tree\n}\n",
	} {
		inPool := nearestPool(t, purge)
		if found, _ := inPool(0); found {
			t.Fatalf("%q: fs/purge.go is in the pool without the nearest chunks: the test does not test them", purge)
		}
		if found, rank := inPool(weights.Near); !found || rank <= 0 {
			t.Errorf("%q: with the %d nearest chunks fs/purge.go in the pool %v, 1/rank by meaning %v", purge, weights.Near, found, rank)
		}
	}
}

// TestChunkVectorLeansOnTheDoc: the doc comment weighs more than the code
// in a chunk's vector (textShare), and a chunk that has neither a doc
// comment nor a word with a vector has no vector.
func TestChunkVectorLeansOnTheDoc(t *testing.T) {
	doc, code := []string{"compress", "gzip", "archiv"}, []string{"socket", "network", "connect"}
	v := chunkVector(doc, nil, append(code, doc...)) // a chunk's text holds its doc comment too
	near := func(words []string) (d int) {
		for i, x := range quantise(unitSum(words)) {
			d += int(x) * int(v[i])
		}
		return d
	}
	if near(doc) <= near(code) || near(code) <= 0 {
		t.Errorf("the vector's dot with its doc comment's %v, with its code's %v: want the doc's larger, the code's above 0", near(doc), near(code))
	}
	if v = chunkVector(nil, nil, code); v == nil || near(code) <= 0 {
		t.Error("a chunk without a doc comment has no vector from its code")
	}
	if v = chunkVector(nil, []string{"qzxv"}, []string{"wqpz"}); v != nil {
		t.Errorf("no word with a vector: got %v, want nil", v)
	}
}

// nearestPool indexes art/tree.go's 1,230 chunks and fs/purge.go (purge)
// and returns whether fs/purge.go is in the reranker's pool for "erase a
// directory tree" with near chunks nearest in meaning, and its 1/rank
// among them.
func nearestPool(t *testing.T, purge string) func(near int) (found bool, rank float64) {
	e := newEnv(t)
	root := t.TempDir()
	var b strings.Builder
	b.WriteString("package art\n")
	for i := range 30 {
		fmt.Fprintf(&b, "\n// Tree%d draws a christmas tree in colour.\nfunc Tree%d() {}\n", i, i)
	}
	for i := range 1200 { // so that fewer than 3% of the chunks say tree, and it is looked up in the text (dropCommon)
		fmt.Fprintf(&b, "\n// Fill%d returns a number.\nfunc Fill%d() int { return %d }\n", i, i, i)
	}
	write(t, root, "art/tree.go", b.String())
	write(t, root, "fs/purge.go", purge)
	e.index(root, "ws", "app")
	ix, err := Open(t.Context(), e.js, Options{DataDir: t.TempDir(), K: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	q := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "erase a directory tree"}
	return func(near int) (found bool, rank float64) {
		w := weights
		defer func() { weights = w }()
		weights.Near = near
		tracePool = func(file string, f features) {
			if file == "fs/purge.go" {
				found, rank = true, f[fNearRank]
			}
		}
		defer func() { tracePool = nil }()
		find(t, ix, q)
		return found, rank
	}
}
