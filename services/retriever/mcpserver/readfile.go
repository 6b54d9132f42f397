package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// ReadInput is read_file_lines's arguments.
type ReadInput struct {
	Path      string `json:"path" jsonschema:"the file, relative to the repository root, as search_code returns it (e.g. pkg/net/retry.go)"`
	Start     int    `json:"start,omitempty" jsonschema:"first line to return (1-based); default 1"`
	End       int    `json:"end,omitempty" jsonschema:"last line to return (inclusive); default: the end of the file. At most 400 lines and 64 KiB are returned per call"`
	Repo      string `json:"repo,omitempty" jsonschema:"the repository holding the file; needed only when several repositories of the workspace have this path"`
	Workspace string `json:"workspace,omitempty" jsonschema:"the workspace; default: the server's default workspace"`
}

// ReadOutput is read_file_lines's structured result.
type ReadOutput struct {
	Workspace  string `json:"workspace" jsonschema:"the workspace read"`
	Repo       string `json:"repo" jsonschema:"the repository holding the file"`
	Path       string `json:"path" jsonschema:"the file, relative to the repository root"`
	Language   string `json:"language" jsonschema:"the file's language"`
	StartLine  int    `json:"startLine" jsonschema:"first line returned"`
	EndLine    int    `json:"endLine" jsonschema:"last line returned"`
	TotalLines int    `json:"totalLines" jsonschema:"the file's last non-blank line"`
	Truncated  bool   `json:"truncated" jsonschema:"true when the size cap cut the range short: call again with start = endLine + 1"`
	Text       string `json:"text" jsonschema:"the lines, each prefixed with its number and a tab"`
}

var readTool = &mcp.Tool{
	Name: "read_file_lines",
	Description: "Read lines of an indexed file, numbered, as the index holds them (not the local disk: only indexed files can be read). " +
		"Give the path as search_code returns it. At most 400 lines and 64 KiB per call; the result says when it was cut short.",
	Annotations: readOnly("Read file lines"),
}

func (t *tools) readFileLines(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	ws := t.ws(in.Workspace)
	if err := checkScope(ws, in.Repo); err != nil {
		return nil, ReadOutput{}, err
	}
	p, err := cleanPath(in.Path)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	if in.Start < 0 || in.End < 0 || in.End != 0 && in.End < max(in.Start, 1) {
		return nil, ReadOutput{}, fmt.Errorf("lines %d-%d: start and end are 1-based, with end >= start", in.Start, in.End)
	}
	rec, err := t.find(ctx, ws, in.Repo, p)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	lines := fileLines(rec)
	start := max(in.Start, 1)
	if start > len(lines) {
		return nil, ReadOutput{}, fmt.Errorf("%s has %d lines: start %d is past its end", p, len(lines), start)
	}
	end := len(lines) // to the end of the file unless told, within the caps
	if in.End != 0 {
		end = min(in.End, end)
	}
	out := ReadOutput{Workspace: ws, Repo: rec.Repo, Path: rec.Path, Language: rec.Language, StartLine: start, TotalLines: len(lines)}
	var b strings.Builder
	out.EndLine = start - 1
	for n := start; n <= end; n++ {
		line := fmt.Sprintf("%6d\t%s\n", n, lines[n-1])
		if n-start == MaxReadLines || b.Len()+len(line) > MaxReadBytes {
			out.Truncated = true
			break
		}
		b.WriteString(line)
		out.EndLine = n
	}
	if out.EndLine < start { // one line alone is over the byte cap: cut it at a rune
		line, cut := lines[start-1], MaxReadBytes/2
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		fmt.Fprintf(&b, "%6d\t%s…\n", start, line[:cut])
		out.EndLine = start
	}
	out.Text = b.String()
	return textResult(readText(out)), out, nil
}

// find returns the stored file; without a repo, the one repository of the
// workspace that has it.
func (t *tools) find(ctx context.Context, ws, repo, p string) (retrieval.FileRecord, error) {
	notIndexed := func(where string) error {
		return fmt.Errorf("%s is not an indexed file of %s: only indexed files can be read (paths as search_code returns them)", p, where)
	}
	if repo != "" {
		rec, err := t.src.File(ctx, ws, repo, p)
		if errors.Is(err, ErrNotIndexed) {
			return rec, notIndexed("workspace " + ws + ", repo " + repo)
		}
		return rec, err
	}
	repos, err := t.src.Repos(ctx, ws)
	if err != nil {
		return retrieval.FileRecord{}, err
	}
	var found []retrieval.FileRecord
	for _, r := range repos {
		rec, err := t.src.File(ctx, ws, r.Repo, p)
		switch {
		case errors.Is(err, ErrNotIndexed):
		case err != nil:
			return rec, err
		default:
			found = append(found, rec)
		}
	}
	switch len(found) {
	case 0:
		return retrieval.FileRecord{}, notIndexed("workspace " + ws)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = f.Repo
	}
	return retrieval.FileRecord{}, fmt.Errorf("%s is in several repositories of workspace %s (%s): pass repo", p, ws, strings.Join(names, ", "))
}

// cleanPath makes p the slash-separated path relative to the repository root
// that the index keys files by. Absolute paths and ".." are refused outright:
// nothing is ever read from disk, but the message should say why.
func cleanPath(p string) (string, error) {
	p = strings.ReplaceAll(strings.TrimSpace(p), `\`, "/")
	if p == "" {
		return "", errors.New("path is empty: give a file path as search_code returns it")
	}
	if strings.HasPrefix(p, "/") || len(p) > 1 && p[1] == ':' || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: give a path relative to the repository root, as search_code returns it", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q: \"..\" is not allowed; give a path relative to the repository root, as search_code returns it", p)
		}
	}
	p = path.Clean(p)
	if p == "." {
		return "", fmt.Errorf("path %q names no file", p)
	}
	return p, nil
}

// fileLines rebuilds a file's lines from its stored chunks. The chunkers
// cover every line and only drop blank lines between chunks (and trailing
// ones), so a line no chunk holds was blank.
func fileLines(rec retrieval.FileRecord) []string {
	n := 0
	for _, c := range rec.Chunks {
		n = max(n, c.EndLine)
	}
	lines := make([]string, n)
	for _, c := range rec.Chunks {
		for i, l := range strings.Split(c.Content, "\n") {
			if at := c.StartLine - 1 + i; at >= 0 && at < n && at <= c.EndLine-1 {
				lines[at] = l
			}
		}
	}
	return lines
}

func readText(o ReadOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (repo %s, %s), lines %d-%d of %d:\n%s", o.Path, o.Repo, o.Language, o.StartLine, o.EndLine, o.TotalLines, o.Text)
	switch {
	case o.Truncated:
		fmt.Fprintf(&b, "[truncated: at most %d lines and %d KiB per call; continue with start=%d]\n", MaxReadLines, MaxReadBytes>>10, o.EndLine+1)
	case o.EndLine == o.TotalLines:
		b.WriteString("[end of file]\n")
	}
	return b.String()
}
