package reply

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// finder hands out the values a request's text names, each at most once:
// numbers in order, quoted strings in order, places (capitalised phrases),
// and values of the formats it can recognise. A nil finder finds nothing.
type finder struct {
	sentence   string
	text       string
	nums       []string
	numUsed    []bool
	quoted     []string
	quotedUsed []bool
	places     []string
	placeUsed  []bool
}

var (
	numberRe = regexp.MustCompile(`(?:^|[^\w.-])(-?\d+(?:\.\d+)?)\b`)
	quotedRe = regexp.MustCompile("\"([^\"\n]+)\"|“([^”\n]+)”|`([^`\n]+)`")
	formatRe = map[string]*regexp.Regexp{
		"email":     regexp.MustCompile(`[\w.+-]+@[\w-]+(?:\.[\w-]+)+`),
		"uri":       regexp.MustCompile(`https?://[^\s"'<>)\]]+`),
		"url":       regexp.MustCompile(`https?://[^\s"'<>)\]]+`),
		"date-time": regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})`),
		"date":      regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`),
		"uuid":      regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`),
	}
)

func newFinder(text string) *finder {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	f := &finder{text: text, sentence: firstLine(text)}
	for _, m := range numberRe.FindAllStringSubmatch(text, -1) {
		f.nums = append(f.nums, m[1])
	}
	f.numUsed = make([]bool, len(f.nums))
	for _, m := range quotedRe.FindAllStringSubmatch(text, -1) {
		f.quoted = append(f.quoted, m[1]+m[2]+m[3])
	}
	f.quotedUsed = make([]bool, len(f.quoted))
	f.places = places(text)
	f.placeUsed = make([]bool, len(f.places))
	return f
}

func firstLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return strings.TrimSpace(line)
}

// placeWords mark a property that names a place: its value is a
// capitalised phrase of the text ("San Francisco").
var placeWords = []string{"city", "location", "place", "country", "address", "region", "town", "destination", "where"}

// freeTextWords mark a property that takes free text: its value is the
// text's first line (a search query, a question).
var freeTextWords = []string{"query", "search", "question", "prompt", "text", "message", "keyword", "topic", "input", "request"}

// kindOf tells which rule fills a string property, from the words of its
// name and description.
func kindOf(h *hint) string {
	all := append(words(h.name), words(h.description)...)
	for _, w := range all {
		for _, p := range placeWords {
			if w == p {
				return "place"
			}
		}
	}
	for _, w := range words(h.name) {
		if w == "q" {
			return "free"
		}
		for _, p := range freeTextWords {
			if w == p {
				return "free"
			}
		}
	}
	return ""
}

// valueFor returns the value the text names for a top-level property.
func (f *finder) valueFor(h *hint, s *obj) (any, bool) {
	if f == nil {
		return nil, false
	}
	if v, ok := f.optionalValue(h, s); ok {
		return v, true
	}
	switch typeOf(s) {
	case "integer", "number":
		return f.number(s, typeOf(s) == "integer")
	case "string":
		if len(list(s, "enum")) > 0 {
			return nil, false
		}
		if kindOf(h) == "free" && fits(s, f.sentence) {
			return f.sentence, true
		}
		for i, q := range f.quoted {
			if !f.quotedUsed[i] && fits(s, q) {
				f.quotedUsed[i] = true
				return q, true
			}
		}
	}
	return nil, false
}

// optionalValue is a value the text names unmistakably: one of the
// property's enum values, a value of its format, or a place for a place
// property. Only these fill optional properties.
func (f *finder) optionalValue(h *hint, s *obj) (any, bool) {
	if f == nil {
		return nil, false
	}
	if enum := list(s, "enum"); len(enum) > 0 {
		lower := strings.ToLower(f.text)
		for _, e := range enum {
			if es, ok := e.(string); ok && es != "" && containsWord(lower, strings.ToLower(es)) {
				return e, true
			}
		}
		return nil, false
	}
	if typeOf(s) != "string" {
		return nil, false
	}
	if re, ok := formatRe[str(s, "format")]; ok {
		if m := re.FindString(f.text); m != "" && fits(s, m) {
			return m, true
		}
		return nil, false
	}
	if kindOf(h) == "place" {
		for i, p := range f.places {
			if !f.placeUsed[i] && fits(s, p) {
				f.placeUsed[i] = true
				return p, true
			}
		}
	}
	return nil, false
}

// number is the next number of the text within the schema's bounds (an
// integer for an integer property).
func (f *finder) number(s *obj, integer bool) (any, bool) {
	step := 0.0
	if integer {
		step = 1
	}
	lo, hi := bounds(s, step)
	for i, n := range f.nums {
		if f.numUsed[i] {
			continue
		}
		v, err := strconv.ParseFloat(n, 64)
		if err != nil || v < lo || v > hi {
			continue
		}
		if m, ok := num(s, "multipleOf"); ok && m > 0 && v/m != float64(int64(v/m)) {
			continue
		}
		if integer {
			if v != float64(int64(v)) {
				continue
			}
			f.numUsed[i] = true
			return int64(v), true
		}
		f.numUsed[i] = true
		return v, true
	}
	return nil, false
}

// fits reports whether a found string satisfies the schema's length and pattern.
func fits(s *obj, v string) bool {
	if v == "" || !fitsLength(s, v) {
		return false
	}
	if p := str(s, "pattern"); p != "" {
		re, err := regexp.Compile(p)
		return err == nil && re.MatchString(v)
	}
	return true
}

// containsWord reports whether w occurs in text as a whole word (or phrase).
func containsWord(text, w string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if (start == 0 || !isWordByte(text[start-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// prepositions introduce a place: "in Paris", "to New York".
var prepositions = map[string]bool{"in": true, "at": true, "for": true, "from": true, "to": true, "near": true, "around": true, "of": true, "about": true}

// connectors may join the capitalised words of one place: "Rio de Janeiro".
var connectors = map[string]bool{"de": true, "da": true, "del": true, "la": true, "le": true, "upon": true, "am": true, "an": true, "der": true, "do": true, "dos": true, "das": true}

// token is a word of the text and what separates it from the previous one.
type token struct {
	word     string
	sentence bool // first word of a sentence (or of the text)
	joined   bool // only spaces separate it from the previous word
	comma    bool // a comma (only) separates it from the previous word
}

func tokens(text string) []token {
	var out []token
	start := true
	sep := ""
	var w []rune
	flush := func() {
		if len(w) == 0 {
			return
		}
		out = append(out, token{word: string(w), sentence: start, joined: !start && strings.TrimSpace(sep) == "" && len(out) > 0,
			comma: strings.TrimSpace(sep) == ","})
		w, start, sep = w[:0], false, ""
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || (len(w) > 0 && (r == '\'' || r == '’' || r == '-')) {
			w = append(w, r)
			continue
		}
		flush()
		sep += string(r)
		if r == '.' || r == '?' || r == '!' || r == '\n' || r == ':' {
			start = true
		}
	}
	flush()
	return out
}

func capitalised(w string) bool {
	for _, r := range w {
		return unicode.IsUpper(r)
	}
	return false
}

// places returns the text's capitalised phrases, those after a preposition
// first ("What's the weather like in San Francisco?" → "San Francisco"),
// a following state code kept ("Austin, TX"). A phrase that opens a
// sentence is a place only after a preposition.
func places(text string) []string {
	toks := tokens(text)
	var after, other []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !capitalised(t.word) || t.word == "I" || strings.ContainsAny(t.word, "'’") {
			continue
		}
		j := i + 1
		for j < len(toks) && toks[j].joined {
			if capitalised(toks[j].word) {
				j++
				continue
			}
			if connectors[toks[j].word] && j+1 < len(toks) && toks[j+1].joined && capitalised(toks[j+1].word) {
				j += 2
				continue
			}
			break
		}
		words := make([]string, 0, j-i)
		for _, x := range toks[i:j] {
			words = append(words, x.word)
		}
		phrase := strings.Join(words, " ")
		if j < len(toks) && toks[j].comma && len(toks[j].word) == 2 && strings.ToUpper(toks[j].word) == toks[j].word {
			phrase += ", " + toks[j].word
			j++
		}
		prep := i > 0 && !t.sentence && prepositions[strings.ToLower(toks[i-1].word)]
		switch {
		case prep:
			after = append(after, phrase)
		case !t.sentence:
			other = append(other, phrase)
		}
		i = j - 1
	}
	return append(after, other...)
}
