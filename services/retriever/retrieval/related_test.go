package retrieval

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestRelatedWordsLearnedFromDocComments: doc comments that say interrupt
// and signal together teach the index that a question about an interrupt
// may mean a signal; a word that is everywhere (gear) is related to nothing,
// and a query term no doc comment holds has no related words.
func TestRelatedWordsLearnedFromDocComments(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	var b strings.Builder
	b.WriteString("package sig\n\n")
	for _, d := range []string{"notify relays an interrupt signal to the gear", "stop ends the gear's interrupt signal",
		"ignore drops every interrupt signal of the gear", "reset restores the gear's default interrupt signal"} {
		name, _, _ := strings.Cut(d, " ")
		fmt.Fprintf(&b, "// %s.\nfunc %s() {}\n\n", d, name)
	}
	write(t, root, "sig/sig.go", b.String())
	b.Reset()
	b.WriteString("package other\n\n")
	for i := range 60 {
		fmt.Fprintf(&b, "// turn%d spins the gear number %d.\nfunc turn%d() {}\n\n", i, i, i)
	}
	write(t, root, "other/gear.go", b.String())
	write(t, root, "watch/watch.go", "package watch\n\n// Watch delivers each signal to the handler.\nfunc Watch() {}\n")
	e.index(root, "ws", "app")
	ix := e.open()
	find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "x"}) // waits for the index

	got, err := ix.related("interrupt")
	if err != nil || !slices.Contains(got, "signal") {
		t.Fatalf("related(interrupt) = %v, %v; want signal among them", got, err)
	}
	if slices.Contains(got, "gear") {
		t.Errorf("related(interrupt) = %v: gear is in most doc comments, it tells nothing", got)
	}
	if got, _ := ix.related("quantum"); got != nil {
		t.Errorf("a word in no doc comment got related words %v", got)
	}

	old := weights
	defer func() { weights = old }()
	weights.Related = 0.3
	hits := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "catch an interrupt"})
	i := slices.IndexFunc(hits, func(c contracts.RagChunk) bool { return c.Path == "watch/watch.go" })
	if i < 0 {
		t.Fatalf("watch.go, which says signal and not interrupt, not found: %v", paths(hits))
	}
	if !slices.ContainsFunc(hits[i].Matches, func(m contracts.RagMatch) bool { return slices.Contains(m.Expanded, "signal") }) {
		t.Errorf("watch.go's matches %+v do not mark signal as an expansion", hits[i].Matches)
	}
}
