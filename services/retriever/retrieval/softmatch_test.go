package retrieval

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestRerankSoftCover: "erase a folder" holds no word of Purge's doc
// comment, but erase lies near delete and folder near directory; Sum's
// words lie near neither. Every chunk is in the pool by its path (folder/),
// which the soft cover does not read. A chunk that says the question's
// words scores the whole question, and Purge's first sentence, which says
// only what it returns, covers less than its whole doc comment.
func TestRerankSoftCover(t *testing.T) {
	got := poolFeatures(t, map[string]string{
		"folder/purge.go": "package folder\n\n// Purge reports how many files it found.\n// It deletes a directory and everything inside it.\nfunc Purge(name string) int { return 0 }\n",
		"folder/sum.go":   "package folder\n\n// Sum adds two numbers and returns the total.\nfunc Sum() {}\n",
		"folder/erase.go": "package folder\n\n// Erase erases a folder.\nfunc Erase() {}\n",
	}, "erase a folder", fFunc)
	purge, sum, erase := got["folder/purge.go"], got["folder/sum.go"], got["folder/erase.go"]
	if purge == (features{}) || sum == (features{}) || erase == (features{}) {
		t.Fatalf("pool: %v", got)
	}
	if purge[fDoc] != 0 || sum[fDoc] != 0 {
		t.Fatalf("doc shares: Purge %v, Sum %v: want 0, the test is about words the doc does not hold", purge[fDoc], sum[fDoc])
	}
	if purge[fSoftDoc] <= sum[fSoftDoc]+0.2 || purge[fSoftDoc] >= 1 {
		t.Errorf("softDoc: Purge %.3f, Sum %.3f: want Purge's well above (deletes a directory) and below 1", purge[fSoftDoc], sum[fSoftDoc])
	}
	if erase[fSoftDoc] != 1 || erase[fSoftSummary] != 1 || erase[fSoftDocOfBest] != 1 {
		t.Errorf("Erase: softDoc %v, softSummary %v, softDocOfBest %v: want 1 (it says every word)", erase[fSoftDoc], erase[fSoftSummary], erase[fSoftDocOfBest])
	}
	if purge[fSoftSummary] >= purge[fSoftDoc] {
		t.Errorf("Purge: softSummary %.3f, softDoc %.3f: want its first sentence to cover less", purge[fSoftSummary], purge[fSoftDoc])
	}
	if want := purge[fSoftDoc] / erase[fSoftDoc]; purge[fSoftDocOfBest] != want {
		t.Errorf("Purge: softDocOfBest %v, want %v", purge[fSoftDocOfBest], want)
	}
}

// TestAkinExplainsTheNearWords: a returned chunk says which of the
// question's words it holds only in a near word, and which word; a chunk
// that holds every word has none to say, and a far word is not shown.
func TestAkinExplainsTheNearWords(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "folder/purge.go", "package folder\n\n// Purge deletes a directory and everything inside it.\nfunc Purge(name string) int { return 0 }\n")
	write(t, root, "folder/sum.go", "package folder\n\n// Sum adds two numbers and returns the total.\nfunc Sum() {}\n")
	write(t, root, "folder/erase.go", "package folder\n\n// Erase erases a folder.\nfunc Erase() {}\n")
	for i := range 10 {
		write(t, root, fmt.Sprintf("filler/f%d.go", i), fmt.Sprintf("package filler\n\n// F%d does nothing.\nfunc F%d() {}\n", i, i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "x"}) // waits for the index
	got := map[string][]contracts.RagAkin{}
	for _, c := range find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "erase a folder"}) {
		if len(c.Akin) > 0 { // the file's declaration, not its package clause
			got[c.Path] = c.Akin
		}
	}
	purge := got["folder/purge.go"]
	if !slices.ContainsFunc(purge, func(a contracts.RagAkin) bool {
		return a.Term == "folder" && a.Word == "directori" && a.Cosine >= akinShown && a.Cosine < 1
	}) {
		t.Errorf("Purge's akin %+v: want folder~directori", purge)
	}
	if !slices.IsSortedFunc(purge, func(a, b contracts.RagAkin) int { return cmp.Compare(b.Cosine, a.Cosine) }) {
		t.Errorf("Purge's akin %+v: want the nearest first", purge)
	}
	if a := got["folder/erase.go"]; len(a) != 0 {
		t.Errorf("Erase's akin %+v: want none, it holds every word", a)
	}
	for _, a := range got["folder/sum.go"] {
		if a.Cosine < akinShown {
			t.Errorf("Sum's akin %+v: a word below %v is shown", a, akinShown)
		}
	}
}

// TestRerankSoftFile: a file's hits read together say more of the question
// than each alone. In trash.go one declaration erases, another opens a
// directory (near folder): the file's reading counts erase whole and
// folder by its near word, more than either declaration's own; a file
// with one declaration reads as that declaration. Every chunk is in the
// pool by its path (folder/), which the soft cover does not read.
func TestRerankSoftFile(t *testing.T) {
	files := map[string]string{
		"folder/trash.go": "package folder\n\n// Erase erases an entry.\nfunc Erase() {}\n\n// Open opens a directory.\nfunc Open() {}\n",
		"folder/sum.go":   "package folder\n\n// Sum erases the total of two numbers.\nfunc Sum() {}\n",
	}
	erase := poolFeatures(t, files, "erase a folder", fFunc)
	trash, sum := erase["folder/trash.go"], erase["folder/sum.go"]
	if trash == (features{}) || sum == (features{}) {
		t.Fatalf("pool: %v", erase)
	}
	if trash[fSoftFile] <= trash[fSoftDoc] || trash[fSoftFile] >= 1 {
		t.Errorf("trash.go: softFile %.3f, its hit's softDoc %.3f: want the file's above and below 1", trash[fSoftFile], trash[fSoftDoc])
	}
	if trash[fSoftFileSummary] <= trash[fSoftSummary] {
		t.Errorf("trash.go: softFileSummary %.3f, its hit's softSummary %.3f: want the file's above", trash[fSoftFileSummary], trash[fSoftSummary])
	}
	if sum[fSoftFile] != sum[fSoftDoc] || sum[fSoftFileSummary] != sum[fSoftSummary] {
		t.Errorf("sum.go, one declaration: softFile %v softFileSummary %v, want its softDoc %v and softSummary %v", sum[fSoftFile], sum[fSoftFileSummary], sum[fSoftDoc], sum[fSoftSummary])
	}
	if trash[fSoftFile] <= sum[fSoftFile] {
		t.Errorf("softFile: trash.go %.3f, sum.go %.3f: want trash.go's above (a directory is near a folder)", trash[fSoftFile], sum[fSoftFile])
	}
}

// TestRerankSoftPackage: a hit's package doc read by near words. Both
// packages' docs hold erase; trash's says directories (near folder),
// count's numbers: the hits of trash read more of "erase a folder".
func TestRerankSoftPackage(t *testing.T) {
	got := poolFeatures(t, map[string]string{
		"trash/doc.go":   "// Package trash erases directories.\npackage trash\n",
		"trash/trash.go": "package trash\n\n// Do erases it.\nfunc Do() {}\n",
		"count/doc.go":   "// Package count erases numbers.\npackage count\n",
		"count/count.go": "package count\n\n// Do erases it.\nfunc Do() {}\n",
	}, "erase a folder", fFunc)
	trash, count := got["trash/trash.go"], got["count/count.go"]
	if trash == (features{}) || count == (features{}) {
		t.Fatalf("pool: %v", got)
	}
	if count[fSoftPkg] <= 0 || trash[fSoftPkg] <= count[fSoftPkg]+0.1 || trash[fSoftPkg] >= 1 {
		t.Errorf("softPkg: trash %.3f, count %.3f: want both above 0 (erase), trash's well above (directories ~ folder) and below 1", trash[fSoftPkg], count[fSoftPkg])
	}
}
