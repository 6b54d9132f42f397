package docs

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	md := strings.Join([]string{
		"# Title",
		"<!-- runnable -->",
		"```sh",
		"echo one",
		"```",
		"",
		"```sh",
		"echo not marked",
		"```",
		"<!-- runnable: ^two$ -->",
		"",
		"- item:",
		"",
		"  <!-- runnable -->",
		"  ```bash",
		"  echo three",
		"    indented",
		"  ```",
		"<!-- runnable: two -->",
		"````sh",
		"cat <<'EOF'",
		"```",
		"EOF",
		"````",
		"````markdown",
		"<!-- runnable -->",
		"```sh",
		"echo an example of the marker, not a block",
		"```",
		"````",
	}, "\n")
	// The second marker is followed by a list item, not a fence: an error.
	if _, err := Extract("x.md", md); err == nil || !strings.Contains(err.Error(), "x.md:10") {
		t.Fatalf("marker before a non-fence: err = %v, want one naming x.md:10", err)
	}
	md = strings.Replace(md, "<!-- runnable: ^two$ -->\n", "", 1)
	blocks, err := Extract("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line           int
		script, expect string
	}{
		{3, "echo one\n", ""},
		{14, "echo three\n  indented\n", ""},
		{19, "cat <<'EOF'\n```\nEOF\n", "two"},
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks, want %d: %+v", len(blocks), len(want), blocks)
	}
	for i, w := range want {
		b := blocks[i]
		got := ""
		if b.Expect != nil {
			got = b.Expect.String()
		}
		if b.Line != w.line || b.Script != w.script || got != w.expect {
			t.Errorf("block %d = line %d %q expect %q, want line %d %q expect %q", i, b.Line, b.Script, got, w.line, w.script, w.expect)
		}
	}
	if _, err := Extract("y.md", "<!-- runnable -->\n```sh\necho open\n"); err == nil {
		t.Error("an unclosed block is not reported")
	}
	if _, err := Extract("y.md", "<!-- runnable: ( -->\n```sh\necho\n```\n"); err == nil {
		t.Error("an invalid expected-output regexp is not reported")
	}
}
