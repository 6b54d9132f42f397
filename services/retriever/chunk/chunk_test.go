package chunk

import (
	"fmt"
	"strings"
	"testing"
)

const goSrc = `// Package demo is a fixture.
package demo

import "fmt"

const answer = 42

// Client talks to the server.
type Client struct {
	addr string
}

// Dial opens a connection.
func Dial(addr string) *Client {
	return &Client{addr: addr}
}

func (c *Client) Close() error {
	fmt.Println("bye")
	return nil
}
`

func symbols(ps []Piece) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d-%d %s", p.StartLine, p.EndLine, p.Symbol))
	}
	return out
}

func TestSplitGoOnDeclarations(t *testing.T) {
	got := symbols(Split("Go", goSrc))
	want := []string{"1-6 ", "8-11 type Client", "13-16 func Dial", "18-21 func (*Client).Close"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	ps := Split("Go", goSrc)
	if !strings.HasPrefix(ps[2].Content, "// Dial opens a connection.\nfunc Dial") {
		t.Errorf("doc comment not kept with its function: %q", ps[2].Content)
	}
}

func TestSplitGoThatDoesNotParseFallsBack(t *testing.T) {
	ps := Split("Go", "package x\nfunc broken( {\n")
	if len(ps) != 1 || ps[0].StartLine != 1 || ps[0].EndLine != 2 {
		t.Fatalf("%+v", ps)
	}
}

func TestSplitLongGoFunctionUnderCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("package x\n\nfunc Long() {\n")
	for i := range 200 {
		fmt.Fprintf(&b, "\tprintln(%d)\n", i)
	}
	b.WriteString("}\n")
	ps := Split("Go", b.String())
	for _, p := range ps {
		if n := p.EndLine - p.StartLine + 1; n > MaxLines {
			t.Errorf("piece of %d lines", n)
		}
	}
	if ps[len(ps)-1].EndLine != 204 || ps[1].Symbol != "func Long" {
		t.Errorf("pieces %v", symbols(ps))
	}
}

func TestSplitMarkdownOnHeadings(t *testing.T) {
	md := "# Title\nintro\n\n## Install\nrun it\n```sh\n# not a heading\n```\n## Use\nok\n"
	got := symbols(Split("Markdown", md))
	want := []string{"1-2 # Title", "4-8 ## Install", "9-10 ## Use"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestSplitBraceLanguagePrefersBlockEnds(t *testing.T) {
	var b strings.Builder
	line := 0
	ends := map[int]bool{}
	for f := range 6 {
		fmt.Fprintf(&b, "public void M%d() {\n", f)
		line++
		for i := range 20 {
			fmt.Fprintf(&b, "    Call(%d);\n", i)
			line++
		}
		b.WriteString("}\n")
		line++
		ends[line] = true
	}
	ps := Split("C#", b.String())
	if len(ps) < 2 {
		t.Fatalf("want several pieces, got %v", symbols(ps))
	}
	for _, p := range ps[:len(ps)-1] {
		if !ends[p.EndLine] {
			t.Errorf("piece %d-%d does not end at a closing brace", p.StartLine, p.EndLine)
		}
	}
}

func TestSplitPythonOnBlankLines(t *testing.T) {
	var b strings.Builder
	for f := range 10 {
		fmt.Fprintf(&b, "def f%d(x):\n", f)
		for i := range 12 {
			fmt.Fprintf(&b, "    x += %d\n", i)
		}
		b.WriteString("    return x\n\n")
	}
	ps := Split("Python", b.String())
	for _, p := range ps {
		if !strings.HasPrefix(p.Content, "def ") {
			t.Errorf("piece %d-%d starts mid-function: %.30q", p.StartLine, p.EndLine, p.Content)
		}
		if n := p.EndLine - p.StartLine + 1; n > MaxLines {
			t.Errorf("piece of %d lines", n)
		}
	}
}

func TestSplitEmpty(t *testing.T) {
	if ps := Split("Go", "  \n\n"); ps != nil {
		t.Fatalf("%+v", ps)
	}
}
