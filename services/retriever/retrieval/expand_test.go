package retrieval

import (
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
		{"sqrt", "squarroot", true},
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
