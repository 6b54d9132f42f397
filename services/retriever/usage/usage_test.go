package usage

import (
	"slices"
	"testing"
)

func TestRefs(t *testing.T) {
	src := `// Join calls strings.Split in a comment: not a use.
func Join(elems []string, sep string) string {
	var b Builder
	b.WriteString(elems[0])
	n := len(sep) + helper(elems)
	s := fmt.Sprintf("%d os.Exit", n)
	return strings.ToUpper(b.String() + s)
}`
	got := Refs("strings", map[string]bool{"fmt": true, "strings": true}, src)
	want := []string{"strings.Builder", ".WriteString", "strings.helper", "fmt.Sprintf", "strings.ToUpper", ".String"}
	if !slices.Equal(got, want) {
		t.Fatalf("Refs:\n got %q\nwant %q", got, want)
	}
}

func TestRefsLeavesDeclarationsOut(t *testing.T) {
	for _, src := range []string{
		"func (b *Builder) WriteString(s string) (int, error) { return b.grow(len(s)) }",
		"func Map[K comparable, V any](m map[K]V) {}",
		"type Reader struct{ r io.Reader }",
	} {
		for _, k := range Refs("p", nil, src) {
			if k == "p.WriteString" || k == "p.Map" || k == "p.Reader" {
				t.Errorf("%q: the declared name %q counted as a use", src, k)
			}
		}
	}
	if got := Refs("p", nil, "func (b *Builder) WriteString(s string) { b.grow(len(s)) }"); !slices.Contains(got, "p.Builder") || !slices.Contains(got, ".grow") {
		t.Errorf("a method's receiver type and calls: %q", got)
	}
	if got := Refs("p", nil, "f := func(x int) { run(x) }"); !slices.Contains(got, "p.run") {
		t.Errorf("a call inside a func literal: %q", got)
	}
}

func TestKey(t *testing.T) {
	for _, c := range []struct{ symbol, key, decl string }{
		{"func Join", "strings.Join", ""},
		{"func (*Builder).WriteString", ".WriteString", "=.WriteString"},
		{"func (Builder).Len", ".Len", "=.Len"},
		{"type Builder", "strings.Builder", ""},
		{"type Reader, Writer", "strings.Reader", ""},
		{"", "", ""},
		{"## Install", "", ""},
	} {
		if k, d := Key("strings", c.symbol); k != c.key || d != c.decl {
			t.Errorf("Key(%q) = %q, %q; want %q, %q", c.symbol, k, d, c.key, c.decl)
		}
	}
}

func TestPackage(t *testing.T) {
	for src, want := range map[string]string{
		"// Copyright\n\n// Package strings does.\npackage strings\n\nimport \"io\"\n": "strings",
		"package main // import \"x\"\n":                                               "main",
		"func f() {}\n":                                                                "",
	} {
		if got := Package(src); got != want {
			t.Errorf("Package(%q) = %q, want %q", src, got, want)
		}
	}
}

func TestRefsFieldsAreNoUses(t *testing.T) {
	got := Refs("p", map[string]bool{"sync": true}, "func f(s *S) { s.mu.Lock(); _ = s.n; var m sync.Mutex; m.Unlock() }")
	want := []string{"p.S", ".Lock", "sync.Mutex", ".Unlock"}
	if !slices.Equal(got, want) {
		t.Fatalf("Refs = %q, want %q", got, want)
	}
}

func TestImports(t *testing.T) {
	src := "// Copyright\n\npackage p\n\nimport (\n\t\"fmt\"\n\tstr \"strings\"\n\t\"github.com/nats-io/nats-server/v2/server\"\n\t\"math/rand/v2\"\n)\n\nimport \"os\"\n"
	got := Imports(src)
	for _, n := range []string{"fmt", "str", "server", "rand", "os"} {
		if !got[n] {
			t.Errorf("Imports misses %q: %v", n, got)
		}
	}
	if got["strings"] || got["v2"] || len(got) != 5 {
		t.Errorf("Imports = %v", got)
	}
}
