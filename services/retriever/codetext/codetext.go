// Package codetext is the text analysis the retriever indexes and queries
// with. Source code names things in camelCase and snake_case, so a plain word
// analyzer would never match "parse duration" against ParseDuration: this
// analyzer splits identifiers into their words (keeping the whole identifier
// too, so an exact name still scores highest), lowercases, drops English stop
// words and stems. It registers itself with bleve as AnalyzerName.
package codetext

import (
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/registry"
)

// AnalyzerName is the bleve analyzer name to use in an index mapping.
const AnalyzerName = "aptix_code"

// MaxTokenBytes drops longer tokens: base64 blobs and hashes only bloat the
// term dictionary.
const MaxTokenBytes = 64

func init() {
	if err := registry.RegisterAnalyzer(AnalyzerName, constructor); err != nil {
		panic(err)
	}
}

func constructor(map[string]any, *registry.Cache) (analysis.Analyzer, error) {
	words := analysis.NewTokenMap()
	for _, w := range StopWords {
		words.AddToken(w)
	}
	return &analysis.DefaultAnalyzer{
		Tokenizer: Tokenizer{},
		TokenFilters: []analysis.TokenFilter{IdentifierSplitter{}, lowercase.NewLowerCaseFilter(),
			stop.NewStopTokensFilter(words), porter.NewPorterStemmer()},
	}, nil
}

// StopWords are dropped from text and queries. The list is much shorter
// than a prose list: words such as "once", "all", "after", "not", "up" or
// "off" name things in code (sync.Once, io.ReadAll, time.After).
var StopWords = []string{
	"a", "an", "the", "of", "to", "in", "on", "for", "with", "by", "at", "from", "as", "into", "about",
	"and", "or", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
	"these", "those", "i", "we", "you", "me", "my", "our", "your", "us", "how", "what", "where",
	"which", "who", "why", "when", "do", "does", "did", "can", "could", "should", "would", "will",
	"shall", "there", "their", "them", "they", "he", "she", "his", "her", "some", "such", "so",
}

// Tokenizer emits runs of letters, digits and underscores: identifiers and
// words. Everything else (operators, punctuation, spaces) separates tokens.
type Tokenizer struct{}

// Tokenize implements analysis.Tokenizer.
func (Tokenizer) Tokenize(input []byte) analysis.TokenStream {
	var out analysis.TokenStream
	start, pos := -1, 0
	glued := -1 // offset of a joining hyphen or dot inside the current token
	emit := func(end int) {
		if start >= 0 && end-start <= MaxTokenBytes {
			pos++
			out = append(out, &analysis.Token{Start: start, End: end, Term: input[start:end], Position: pos, Type: analysis.AlphaNumeric})
		}
		start, glued = -1, -1 // a glued token too long to keep must not leave its hyphen to the next token
	}
	emitGlued := func(end int) {
		if glued < 0 || start < 0 || end-start > MaxTokenBytes {
			emit(end)
			return
		}
		term := append(append([]byte{}, input[start:glued]...), input[glued+1:end]...)
		pos++
		out = append(out, &analysis.Token{Start: start, End: end, Term: term, Position: pos, Type: analysis.AlphaNumeric})
		start, glued = -1, -1
	}
	for i := 0; i < len(input); {
		c := input[i]
		size := 1
		if (c == '-' || c == '.') && glued < 0 && gluesDigits(input, start, i) {
			glued = i // UTF-8, SHA-256, X.509: one word, spelt as the identifiers spell it
			i++
			continue
		}
		word := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if c >= utf8.RuneSelf {
			var r rune
			r, size = utf8.DecodeRune(input[i:])
			word = unicode.IsLetter(r) || unicode.IsDigit(r)
		}
		if word {
			if start < 0 {
				start = i
			}
		} else {
			emitGlued(i)
		}
		i += size
	}
	emitGlued(len(input))
	return out
}

// gluesDigits reports whether the hyphen or dot at input[at] joins a short
// run of letters (the whole token so far, at most maxGlueLetters) to digits:
// UTF-8, SHA-256 and X.509 are written utf8, sha256 and x509 in code, so the
// tokenizer reads them as one word. "go1.22" or "a-b" are left alone.
func gluesDigits(input []byte, start, at int) bool {
	if start < 0 || at-start > maxGlueLetters || at+1 >= len(input) || input[at+1] < '0' || input[at+1] > '9' {
		return false
	}
	for _, c := range input[start:at] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// maxGlueLetters bounds the letters gluesDigits joins to digits.
const maxGlueLetters = 6

// IdentifierSplitter follows each token made of several words (HTTPServer,
// parse_duration, utf8Valid) with those words, at the same position.
type IdentifierSplitter struct{}

// Filter implements analysis.TokenFilter.
func (IdentifierSplitter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in))
	for _, t := range in {
		parts := Split(t.Term)
		if len(parts) == 1 && len(parts[0]) == len(t.Term) {
			out = append(out, t)
			continue
		}
		if len(parts) > 1 {
			out = append(out, t) // the whole identifier; a bare "_x" keeps only "x"
		}
		for _, p := range parts {
			out = append(out, &analysis.Token{Start: t.Start + p[0], End: t.Start + p[1], Term: t.Term[p[0]:p[1]], Position: t.Position, Type: t.Type})
		}
	}
	return out
}

// Split returns the [start, end) byte offsets of the words of an identifier:
// it cuts at underscores, where a lower case letter or digit is followed by
// an upper case one (parseDuration, utf8Valid) and before the last capital
// of a run followed by a lower case letter (HTTPServer → HTTP Server).
func Split(term []byte) [][2]int {
	var out [][2]int
	start := -1
	var prev rune
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, [2]int{start, end})
		}
		start = -1
	}
	for i := 0; i < len(term); {
		r, size := utf8.DecodeRune(term[i:])
		if r == '_' {
			flush(i)
			prev = r
			i += size
			continue
		}
		if start >= 0 {
			switch {
			case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
				flush(i)
			case unicode.IsLower(r) && unicode.IsUpper(prev) && i-start > utf8.RuneLen(prev):
				// HTTPServer: the S starts the next word.
				pl := utf8.RuneLen(prev)
				out = append(out, [2]int{start, i - pl})
				start = i - pl
			}
		}
		if start < 0 {
			start = i
		}
		prev = r
		i += size
	}
	flush(len(term))
	return out
}
