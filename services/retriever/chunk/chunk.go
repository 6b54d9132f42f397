// Package chunk splits source files into the pieces the retriever indexes:
// on code boundaries where that is cheap (go/ast for Go, headings for
// Markdown) and with a blank-line and brace-aware splitter under a line cap
// for everything else. It is plain Go: no index, no bus.
package chunk

import (
	"strings"
)

// Piece is one chunk of a file. Lines are 1-based and inclusive.
type Piece struct {
	StartLine int
	EndLine   int
	// Symbol names what the piece holds when known ("func (*Server).Serve",
	// "type Client", "## Install"); it is indexed with a boost.
	Symbol  string
	Content string
}

// MaxLines caps a piece; longer declarations are split with the text splitter.
const MaxLines = 80

// Split chunks content according to its language (a go-enry language name).
func Split(language string, content string) []Piece {
	if strings.TrimSpace(content) == "" {
		return nil
	}
	switch language {
	case "Go":
		if p, ok := splitGo(content); ok {
			return p
		}
	case "Markdown":
		return splitMarkdown(content)
	}
	return splitText(lines(content), 1, "")
}

// lines splits content into lines without their newlines; a final newline
// does not make an extra empty line.
func lines(content string) []string {
	content = strings.TrimSuffix(content, "\n")
	return strings.Split(content, "\n")
}

// piece builds a Piece from lines[from:to] (0-based, exclusive end) of a
// file whose first line is line 1.
func piece(ls []string, from, to int, symbol string) Piece {
	return Piece{StartLine: from + 1, EndLine: to, Symbol: symbol, Content: strings.Join(ls[from:to], "\n")}
}
