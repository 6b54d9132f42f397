package contextblock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Parse reads an AGN-002 block back into chunks (Language holds the fence
// tag). It is strict: it exists to prove Format's output is unambiguous and
// to let tools and tests read what a model was shown, so any deviation from
// the layout is an error naming the line.
func Parse(block string) ([]contracts.RagChunk, error) {
	if block == "" {
		return nil, nil
	}
	p := parser{lines: strings.Split(block, "\n")}
	if p.next() != Header {
		return nil, p.errf("want %q", Header)
	}
	var chunks []contracts.RagChunk
	for p.i < len(p.lines) {
		if p.next() != "" {
			return nil, p.errf("want a blank line before chunk %d", len(chunks)+1)
		}
		c, err := p.chunk(len(chunks) + 1)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, c)
	}
	if len(chunks) == 0 {
		return nil, p.errf("block has no chunks")
	}
	return chunks, nil
}

type parser struct {
	lines []string
	i     int
}

func (p *parser) next() string {
	if p.i >= len(p.lines) {
		p.i++
		return "\x00eof"
	}
	l := p.lines[p.i]
	p.i++
	return l
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("context block line %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) field(name string) (string, error) {
	l := p.next()
	v, ok := strings.CutPrefix(l, name+": ")
	if !ok {
		return "", p.errf("want %q, got %q", name+": ", l)
	}
	return v, nil
}

func (p *parser) chunk(n int) (contracts.RagChunk, error) {
	var c contracts.RagChunk
	if want := "=== CHUNK " + strconv.Itoa(n) + " ==="; p.next() != want {
		return c, p.errf("want %q", want)
	}
	var err error
	if c.Id, err = p.field("Id"); err != nil {
		return c, err
	}
	if c.Path, err = p.field("Path"); err != nil {
		return c, err
	}
	lines, err := p.field("Lines")
	if err != nil {
		return c, err
	}
	start, end, ok := strings.Cut(lines, "-")
	if c.StartLine, err = strconv.Atoi(start); !ok || err != nil {
		return c, p.errf("bad line span %q", lines)
	}
	if c.EndLine, err = strconv.Atoi(end); err != nil {
		return c, p.errf("bad line span %q", lines)
	}
	if c.Language, err = p.field("Language"); err != nil {
		return c, err
	}
	open := p.next()
	fence := open[:len(open)-len(strings.TrimLeft(open, "`"))]
	if len(fence) < 3 || open[len(fence):] != c.Language {
		return c, p.errf("want an opening fence tagged %q, got %q", c.Language, open)
	}
	startAt := p.i
	for p.i < len(p.lines) {
		if p.lines[p.i] == fence {
			c.Content = strings.Join(p.lines[startAt:p.i], "\n")
			p.i++
			return c, nil
		}
		p.i++
	}
	return c, p.errf("chunk %d: fence %q never closed", n, fence)
}
