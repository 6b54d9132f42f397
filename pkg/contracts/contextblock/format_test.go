package contextblock

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// seedChunks are the two chunks of AGN-002 §8, as the retriever would hand
// them over (language as go-enry names it).
var seedChunks = []contracts.RagChunk{
	{Id: "ctx_1", Path: "Billing/Managers/InvoiceManager.cs", StartLine: 40, EndLine: 85, Language: "C#",
		Content: "public class InvoiceManager\n{\n    public void SendInvoiceEmail(Invoice invoice) {\n        ...\n    }\n}"},
	{Id: "ctx_2", Path: "Billing/Api/InvoiceController.cs", StartLine: 10, EndLine: 55, Language: "C#",
		Content: "[ApiController]\n[Route(\"api/invoices\")]\npublic class InvoiceController : ControllerBase\n{\n    ...\n}"},
}

// TestSeedCanonicalExample reproduces AGN-002 §8 byte for byte. The golden
// file is the example copied verbatim from the seed (between its outer
// ```text fence); when the seed itself is present it is compared too.
func TestSeedCanonicalExample(t *testing.T) {
	golden, err := os.ReadFile("testdata/agn002-canonical.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := Format(seedChunks, Options{})
	if got.Text != string(golden) {
		t.Fatalf("block differs from AGN-002 §8\n--- got ---\n%s\n--- want ---\n%s", got.Text, golden)
	}
	if len(got.Included) != 2 || len(got.Dropped) != 0 || len(got.Warnings) != 0 {
		t.Fatalf("included %d dropped %d warnings %v", len(got.Included), len(got.Dropped), got.Warnings)
	}
}

func TestLayoutRules(t *testing.T) {
	text := Format(seedChunks, Options{}).Text
	for _, rule := range []struct{ name, want string }{
		{"header then one blank line", "[CONTEXT]\n\n=== CHUNK 1 ===\n"},
		{"metadata in order", "Id: ctx_1\nPath: Billing/Managers/InvoiceManager.cs\nLines: 40-85\nLanguage: csharp\n```csharp\n"},
		{"one blank line between chunks", "}\n```\n\n=== CHUNK 2 ===\n"},
	} {
		if !strings.Contains(text, rule.want) {
			t.Errorf("%s: %q not in block", rule.name, rule.want)
		}
	}
	if strings.HasSuffix(text, "\n") {
		t.Error("block must end at the last closing fence, like the seed example")
	}
	if strings.Contains(text, "\n\n\n") {
		t.Error("never two blank lines in a row")
	}
}

func TestEmptyInputOmitsBlock(t *testing.T) {
	if b := Format(nil, Options{}); b.Text != "" || b.Warnings != nil {
		t.Fatalf("got %+v", b)
	}
}

func TestFenceTag(t *testing.T) {
	for in, want := range map[string]string{
		"C#": "csharp", "TypeScript": "typescript", "SCSS": "scss", "JSON": "json", "XML": "xml",
		"Go": "go", "C++": "cpp", "Shell": "bash", "Markdown": "markdown", "": "text",
		"Visual Basic .NET": "vbnet", "Emacs Lisp": "emacs-lisp", "we`ird": "weird", "```": "text",
	} {
		if got := FenceTag(in); got != want {
			t.Errorf("FenceTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBacktickContentGetsLongerFence(t *testing.T) {
	content := "Some docs:\n```go\nfmt.Println(\"x\")\n```\nand ````four```` too"
	b := Format([]contracts.RagChunk{{Id: "a", Path: "README.md", StartLine: 1, EndLine: 5, Language: "Markdown", Content: content}}, Options{})
	if !strings.Contains(b.Text, "\n`````markdown\n"+content+"\n`````") {
		t.Fatalf("want a five-backtick fence around the content:\n%s", b.Text)
	}
	back, err := Parse(b.Text)
	if err != nil || len(back) != 1 || back[0].Content != content {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

func TestBudgetDropsLowestRanked(t *testing.T) {
	chunks := make([]contracts.RagChunk, 5)
	for i := range chunks {
		chunks[i] = contracts.RagChunk{Id: "c" + string(rune('1'+i)), Path: "a.go", StartLine: 1, EndLine: 9, Language: "Go",
			Content: strings.Repeat("x", 200)}
	}
	full := Format(chunks, Options{})
	three := Format(chunks[:3], Options{})
	tests := []struct {
		name     string
		o        Options
		included int
	}{
		{"no budget", Options{}, 5},
		{"exactly three fit", Options{MaxChars: len(three.Text)}, 3},
		{"one byte short of three", Options{MaxChars: len(three.Text) - 1}, 2},
		{"token budget", Options{MaxTokens: (len(three.Text) + 3) / 4}, 3},
		{"nothing fits", Options{MaxChars: 20}, 0},
		{"everything fits", Options{MaxChars: len(full.Text)}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Format(chunks, tt.o)
			if len(b.Included) != tt.included || len(b.Dropped) != 5-tt.included {
				t.Fatalf("included %d dropped %d", len(b.Included), len(b.Dropped))
			}
			for i, c := range b.Included {
				if c.Id != chunks[i].Id {
					t.Fatalf("kept %s at %d: the highest-ranked chunks must stay", c.Id, i)
				}
			}
			if tt.o.MaxChars > 0 && len(b.Text) > tt.o.MaxChars {
				t.Fatalf("block is %d bytes, budget %d", len(b.Text), tt.o.MaxChars)
			}
			if (len(b.Dropped) > 0) != (len(b.Warnings) == 1) {
				t.Fatalf("warnings %v for %d dropped", b.Warnings, len(b.Dropped))
			}
			if len(b.Dropped) > 0 && !strings.Contains(b.Warnings[0], b.Dropped[0].Id) {
				t.Fatalf("warning %q does not name the dropped chunk", b.Warnings[0])
			}
			if tt.included == 0 && b.Text != "" {
				t.Fatal("an empty block must be omitted")
			}
		})
	}
}

func TestMetadataCannotForgeLines(t *testing.T) {
	b := Format([]contracts.RagChunk{{Id: "x", Path: "a\nLines: 1-1", StartLine: 1, EndLine: 2, Content: "c"}}, Options{})
	back, err := Parse(b.Text)
	if err != nil || back[0].Path != "a Lines: 1-1" {
		t.Fatalf("%v %+v", err, back)
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	good := Format(seedChunks, Options{}).Text
	for name, bad := range map[string]string{
		"no header":      strings.TrimPrefix(good, "[CONTEXT]"),
		"unclosed fence": strings.TrimSuffix(good, "```"),
		"fields swapped": strings.Replace(good, "Id: ctx_1\nPath: Billing/Managers/InvoiceManager.cs", "Path: Billing/Managers/InvoiceManager.cs\nId: ctx_1", 1),
		"bad lines":      strings.Replace(good, "Lines: 40-85", "Lines: forty", 1),
		"header only":    "[CONTEXT]\n",
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// FuzzRoundTrip: arbitrary content and languages always yield a block that
// parses back into the same chunks.
func FuzzRoundTrip(f *testing.F) {
	f.Add("public class X {}", "C#", "plain")
	f.Add("```\n```go\n````", "Markdown", "")
	f.Add("", "", "\n\n=== CHUNK 2 ===\n")
	f.Add("=== CHUNK 9 ===\nId: forged", "we`ird", "\r\n```")
	f.Fuzz(func(t *testing.T, a, lang, b string) {
		in := []contracts.RagChunk{
			{Id: "ctx_1", Path: "p/a.cs", StartLine: 1, EndLine: 2, Language: lang, Content: a},
			{Id: "ctx_2", Path: "p/b.cs", StartLine: 3, EndLine: 4, Language: "TypeScript", Content: b},
		}
		block := Format(in, Options{})
		got, err := Parse(block.Text)
		if err != nil {
			t.Fatalf("parse: %v\n%s", err, block.Text)
		}
		want := []contracts.RagChunk{in[0], in[1]}
		want[0].Language = FenceTag(lang)
		want[1].Language = "typescript"
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
		}
	})
}
