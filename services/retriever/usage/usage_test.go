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
	got := Refs("strings", src)
	want := []string{"strings.Builder", "b.WriteString", ".WriteString", "strings.helper", "fmt.Sprintf", ".Sprintf", "strings.ToUpper", ".ToUpper", "b.String", ".String"}
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
		for _, k := range Refs("p", src) {
			if k == "p.WriteString" || k == "p.Map" || k == "p.Reader" {
				t.Errorf("%q: the declared name %q counted as a use", src, k)
			}
		}
	}
	if got := Refs("p", "func (b *Builder) WriteString(s string) { b.grow(len(s)) }"); !slices.Contains(got, "p.Builder") || !slices.Contains(got, ".grow") {
		t.Errorf("a method's receiver type and calls: %q", got)
	}
	if got := Refs("p", "f := func(x int) { run(x) }"); !slices.Contains(got, "p.run") {
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
