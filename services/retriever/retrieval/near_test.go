package retrieval

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestNearestJoinsThePool: a chunk that holds a question's word only in
// its body, below thirty that hold it in their names and doc comments,
// is cut from the pool BM25F fills (20 hits for K = 1); its doc comment
// says what the question asks in other words, so the nearest-chunk
// search brings it back (weights.Near) with its rank by meaning. Every
// chunk of art/tree.go holds "tree" in its path, so far more than Near
// chunks are touched: fewer, and every one with a vector would join.
func TestNearestJoinsThePool(t *testing.T) {
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
	write(t, root, "fs/purge.go", "package fs\n\n// Purge deletes a folder and everything inside it.\nfunc Purge(name string) {\n\twalk(name) // the whole tree\n}\n")
	e.index(root, "ws", "app")
	ix, err := Open(t.Context(), e.js, Options{DataDir: t.TempDir(), K: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	q := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "erase a directory tree"}
	inPool := func(near int) (found bool, rank float64) {
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
	if found, _ := inPool(0); found {
		t.Fatal("fs/purge.go is in the pool without the nearest chunks: the test does not test them")
	}
	if found, rank := inPool(weights.Near); !found || rank <= 0 {
		t.Fatalf("with the %d nearest chunks fs/purge.go in the pool %v, 1/rank by meaning %v", weights.Near, found, rank)
	}
}
