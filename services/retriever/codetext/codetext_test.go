package codetext

import (
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2/registry"
)

func TestSplit(t *testing.T) {
	for in, want := range map[string]string{
		"ParseDuration":  "Parse Duration",
		"HTTPServer":     "HTTP Server",
		"parse_duration": "parse duration",
		"utf8Valid":      "utf8 Valid",
		"md5sum":         "md5sum",
		"_x":             "x",
		"URL":            "URL",
		"a__b_":          "a b",
		"ÄpfelBaum":      "Äpfel Baum",
	} {
		var got []string
		for _, p := range Split([]byte(in)) {
			got = append(got, in[p[0]:p[1]])
		}
		if strings.Join(got, " ") != want {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
}

func analyze(t *testing.T, s string) string {
	t.Helper()
	a, err := registry.NewCache().AnalyzerNamed(AnalyzerName)
	if err != nil {
		t.Fatal(err)
	}
	var terms []string
	for _, tok := range a.Analyze([]byte(s)) {
		terms = append(terms, string(tok.Term))
	}
	return strings.Join(terms, " ")
}

func TestAnalyzer(t *testing.T) {
	for in, want := range map[string]string{
		"func ParseDuration(s string) (Duration, error)": "func parsedur pars durat s string durat error",
		"parse a duration string like 1h30m":             "pars durat string like 1h30m",
		"x := http_server.ListenAndServe()":              "x http_server http server listenandserv listen serv",
		"naïve café":                                     "naïv café",
		strings.Repeat("A", MaxTokenBytes+1) + " ok":     "ok",
		"decode UTF-8 and SHA-256, parse X.509":          "decod utf8 sha256 pars x509",
		"go1.22 a-b 3-4 e.g. v-1":                        "go1 22 b 3 4 e g v1",
		"utf8.Valid":                                     "utf8 valid",
		// A glued token too long to keep (a container's id after its
		// name) once left its hyphen's offset to the next token, which
		// then sliced backwards and panicked.
		"docker-6" + strings.Repeat("f", MaxTokenBytes) + ".scope": "scope",
	} {
		if got := analyze(t, in); got != want {
			t.Errorf("analyze(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzTokenize checks that any text tokenizes without a panic into tokens
// whose offsets lie inside it, in order: the tokenizer reads every file the
// index is given, whatever it holds.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"SHA-256 X.509", "docker-6" + strings.Repeat("f", MaxTokenBytes) + ".scope", "a-1.b-2", "naïve-1 café.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		last := 0
		for _, tok := range (Tokenizer{}).Tokenize([]byte(s)) {
			if tok.Start < last || tok.End > len(s) || tok.Start >= tok.End || len(tok.Term) == 0 {
				t.Fatalf("token %q at [%d, %d) after %d in %q", tok.Term, tok.Start, tok.End, last, s)
			}
			last = tok.End
		}
	})
}
