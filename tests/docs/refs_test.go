package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// README.md is the front door; the reference lives in docs/.
const readmeMaxLines = 300

func TestREADMELength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material into docs/", n, readmeMaxLines)
	}
}

// docRefRE is a docs page cited from code, with an optional anchor.
var docRefRE = regexp.MustCompile(`\bdocs/([a-z0-9_-]+\.md)(#[a-z0-9_-]+)?`)

// TestDocCitations: every docs/ page a Go file cites exists, and so does the
// heading its anchor names.
func TestDocCitations(t *testing.T) {
	root := repoRoot(t)
	cited := 0
	walk(t, root, func(rel string) {
		if !strings.HasSuffix(rel, ".go") || strings.HasPrefix(rel, "tests/docs/") {
			return
		}
		text, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range docRefRE.FindAllStringSubmatch(line, -1) {
				cited++
				if msg := checkTarget(root, filepath.Join("docs", m[1]), strings.TrimPrefix(m[2], "#")); msg != "" {
					t.Errorf("%s:%d cites %s: %s", rel, i+1, m[0], msg)
				}
			}
		}
	})
	if cited == 0 {
		t.Error("no Go file cites a docs/ page: the check is looking in the wrong place")
	}
}

// linkRE is a Markdown inline link's target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link in README.md and docs/*.md resolves to a
// file of the repository, and its anchor to a heading of that file.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	for _, f := range markdownPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				if path == "" {
					path = f
				} else {
					path = filepath.Join(filepath.Dir(f), path)
				}
				if msg := checkTarget(root, path, anchor); msg != "" {
					t.Errorf("%s:%d links to %s: %s", f, i+1, target, msg)
				}
			}
		}
	}
}

// outsideRE are references a reader of the repository cannot follow: the
// design notes and specification files kept outside it, and their numbers.
var outsideRE = regexp.MustCompile(`DESIGN[.]md|[.][.]/shared|shared/seeds|\b[Ss]eed 0{2}[0-9]`)

// issueRE is a development-log reference; git log is the history.
var issueRE = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+\b`)

// TestNoOutsideReferences: no Go or Markdown file cites what is not in the
// repository, and none cites an issue number.
func TestNoOutsideReferences(t *testing.T) {
	root := repoRoot(t)
	walk(t, root, func(rel string) {
		md := strings.HasSuffix(rel, ".md")
		if (!md && !strings.HasSuffix(rel, ".go")) || strings.HasPrefix(rel, "tests/docs/") {
			return
		}
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 4<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if m := outsideRE.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which is not in the repository: cite a docs/ page", rel, n, m)
			}
			if m := issueRE.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q: docs say what is true, git log says how it came to be", rel, n, m)
			}
		}
	})
}

// checkTarget says what is wrong with a link to path#anchor, or "".
func checkTarget(root, path, anchor string) string {
	text, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return "no such file"
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return ""
	}
	if _, ok := anchors(string(text))[anchor]; !ok {
		return "no heading with anchor #" + anchor
	}
	return ""
}

// anchors are the heading anchors GitHub generates for a Markdown text:
// lowercase, punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var sb strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
				sb.WriteRune(r)
			case r == ' ':
				sb.WriteByte('-')
			}
		}
		slug := sb.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// markdownPages are README.md and docs/*.md, relative to root.
func markdownPages(t *testing.T, root string) []string {
	pages := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		rel, _ := filepath.Rel(root, p)
		pages = append(pages, rel)
	}
	return pages
}

// walk calls fn with every file's path relative to root, skipping what git
// ignores here (bin/, data) and version control.
func walk(t *testing.T, root string, fn func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", ".data", "deploy/nats/nkeys":
				return filepath.SkipDir
			}
			return nil
		}
		fn(filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
