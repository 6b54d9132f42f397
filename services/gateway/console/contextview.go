package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
)

// splitContext sets the AGN-002 [CONTEXT] block apart from the upstream
// request body (docs/context-block.md): the body is shown with the block's
// text replaced by a marker, and the block as its chunks, each linked to
// its file and lines (sourceURL) or to the turn's retrieval list.
func splitContext(body []byte, sourceURL string) (string, contextView) {
	var cv contextView
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return pretty(body), cv
	}
	var block string
	var chunks []contracts.RagChunk
	v = walk(v, func(s string) (string, bool) {
		if !strings.HasPrefix(s, contextblock.Header+"\n") {
			return s, false
		}
		block = s
		var err error
		if chunks, err = contextblock.Parse(block); err != nil {
			cv.Raw, cv.Err = block, err.Error()
		}
		return fmt.Sprintf("‹the [CONTEXT] block: %d chunk(s), %d characters, shown below›", len(chunks), len(block)), true
	})
	if block == "" {
		return pretty(body), cv
	}
	cv.Found = true
	for i, ch := range chunks {
		view := chunkView{N: i + 1, Id: ch.Id, Path: ch.Path, Language: ch.Language, StartLine: ch.StartLine, EndLine: ch.EndLine, Content: ch.Content,
			Href: "#retrieved-" + ch.Id}
		if sourceURL != "" {
			view.Href, view.External = sourceLink(sourceURL, ch.Path, ch.StartLine, ch.EndLine), true
		}
		cv.Chunks = append(cv.Chunks, view)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return pretty(body), cv
	}
	return buf.String(), cv
}

// walk replaces the first string f takes (f reports true) anywhere in v.
func walk(v any, f func(string) (string, bool)) any {
	done := false
	var rec func(any) any
	rec = func(v any) any {
		if done {
			return v
		}
		switch t := v.(type) {
		case string:
			if s, ok := f(t); ok {
				done = true
				return s
			}
		case map[string]any:
			for k, x := range t {
				t[k] = rec(x)
			}
		case []any:
			for i, x := range t {
				t[i] = rec(x)
			}
		}
		return v
	}
	return rec(v)
}

// sourceLink fills a source URL template: {path}, {start}, {end}.
func sourceLink(tmpl, path string, start, end int) string {
	esc := func(s string) string {
		parts := strings.Split(s, "/")
		for i, p := range parts {
			parts[i] = url.PathEscape(p)
		}
		return strings.Join(parts, "/")
	}
	return strings.NewReplacer("{path}", esc(path), "{start}", strconv.Itoa(start), "{end}", strconv.Itoa(end)).Replace(tmpl)
}
