package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// Block is one fenced shell block marked runnable.
type Block struct {
	File string
	// Line is the 1-based line of the opening fence.
	Line   int
	Script string
	// Expect, when set, must match the block's combined output.
	Expect *regexp.Regexp
}

// markerRE is the marker line: `<!-- runnable -->`, or
// `<!-- runnable: REGEX -->` to also match the output against REGEX.
var markerRE = regexp.MustCompile(`^\s*<!--\s*runnable(?::\s*(.*?))?\s*-->\s*$`)

// fenceRE opens a shell block; the info string must name sh or bash.
var fenceRE = regexp.MustCompile("^(\\s*)(```+)\\s*(sh|bash|shell)\\b")

// anyFenceRE opens any fenced block.
var anyFenceRE = regexp.MustCompile("^\\s*(```+|~~~+)")

// Extract returns the runnable blocks of one Markdown file. A marker must be
// followed, after blank lines only, by a sh or bash fence: a marker in front
// of anything else is an error, so a block is never silently skipped.
func Extract(file, text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		if f := anyFenceRE.FindStringSubmatch(lines[i]); f != nil {
			// An unmarked fenced block: a marker shown inside it is an example.
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != f[1]; i++ {
			}
			continue
		}
		m := markerRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		marker := i + 1
		var expect *regexp.Regexp
		if m[1] != "" {
			re, err := regexp.Compile(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: runnable marker's expected output: %w", file, marker, err)
			}
			expect = re
		}
		i++
		for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: runnable marker at the end of the file", file, marker)
		}
		f := fenceRE.FindStringSubmatch(lines[i])
		if f == nil {
			return nil, fmt.Errorf("%s:%d: runnable marker not followed by a ```sh or ```bash block (line %d: %q)", file, marker, i+1, lines[i])
		}
		indent, fence, open := f[1], f[2], i+1
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimPrefix(lines[i], indent)
			if strings.TrimSpace(l) == fence {
				closed = true
				break
			}
			body = append(body, l)
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: runnable block never closed", file, open)
		}
		blocks = append(blocks, Block{File: file, Line: open, Script: strings.Join(body, "\n") + "\n", Expect: expect})
	}
	return blocks, nil
}
