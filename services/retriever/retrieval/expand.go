package retrieval

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// Identifiers abbreviate the words a developer asks in (dir for directory,
// msg for message, cfg for configuration, ack for acknowledge), and a doc
// comment often spells the word out only once, if at all. abbreviations
// learns the short forms from the index itself: the symbol field's
// vocabulary is the set of words identifiers are made of, so a query term's
// abbreviations are the symbol words that could be written for it. The
// vocabulary is the one every replica builds from the same bucket, so
// replicas expand alike, and it follows the index as files change.
//
// A symbol word a is taken as an abbreviation of a query term w (analyzed)
// when it starts with w's first letter, keeps w's letters in order
// (a subsequence), is 3 to 5 letters and at least 3 shorter than w (so
// stems and plurals are not counted), names at least minAbbrevDF chunks'
// symbols and at most maxAbbrevShare of them, and meets w in at least
// minTogether doc comments (see together). At most maxAbbrevs per term, the most used first.
const (
	minAbbrevDF     = 3
	maxAbbrevs      = 3
	maxAbbrevChecks = 8 // candidates checked with together, the most used first
	minTogether     = 3
	maxAbbrevShare  = 0.01
)

// abbrevCache holds the abbreviations found per query term and the sole
// workspace. It is dropped whenever a batch changes the index.
type abbrevCache struct {
	mu        sync.Mutex
	m         map[string][]string
	sole      string // see soleWorkspace
	soleKnown bool
}

func (c *abbrevCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.sole, c.soleKnown = "", false
	c.mu.Unlock()
}

// soleWorkspace returns the index's only workspace, or "" when it holds
// none or several. A search of the only workspace needs no workspace
// filter, whose postings hold every chunk and would be walked in step with
// the question's words for nothing. Cached with the abbreviations.
func (ix *Index) soleWorkspace() (string, error) {
	c := &ix.abbrevs
	c.mu.Lock()
	sole, known := c.sole, c.soleKnown
	c.mu.Unlock()
	if known {
		return sole, nil
	}
	if ix.memReady.Load() {
		ws := ix.mem.KeywordValues(termindex.Workspace)
		sole = ""
		if len(ws) == 1 {
			for w := range ws {
				sole = w
			}
		}
		c.mu.Lock()
		c.sole, c.soleKnown = sole, true
		c.mu.Unlock()
		return sole, nil
	}
	d, err := ix.idx.FieldDict("workspace")
	if err != nil {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	defer d.Close()
	var names []string
	for len(names) < 2 {
		e, err := d.Next()
		if err != nil {
			return "", fmt.Errorf("workspaces: %w", err)
		}
		if e == nil {
			break
		}
		if e.Count > 0 {
			names = append(names, e.Term)
		}
	}
	if len(names) == 1 {
		sole = names[0]
	}
	c.mu.Lock()
	c.sole, c.soleKnown = sole, true
	c.mu.Unlock()
	return sole, nil
}

// abbreviations returns the symbol words that abbreviate w, as above.
func (ix *Index) abbreviations(w string) ([]string, error) {
	if len(w) < 6 {
		return nil, nil
	}
	ix.abbrevs.mu.Lock()
	got, ok := ix.abbrevs.m[w]
	ix.abbrevs.mu.Unlock()
	if ok {
		return got, nil
	}
	type cand struct {
		term string
		df   uint64
	}
	var cs []cand
	var maxDF uint64
	fits := func(term string, count uint64) bool {
		n := len(term)
		return n >= 3 && n <= 5 && n+3 <= len(w) && count >= minAbbrevDF && count <= maxDF && subsequence(term, w) &&
			(!weights.AbbrevShape || shapedLike(term, w))
	}
	// A word in more than maxAbbrevShare of the symbols (func, type, the
	// receiver of every method of a big type) abbreviates nothing useful.
	if ix.memReady.Load() {
		maxDF = max(uint64(maxAbbrevShare*float64(ix.mem.Len())), 20)
		ix.mem.ShortTerms(termindex.Symbol, w[0], 3, 5, func(term string, df int) {
			if fits(term, uint64(df)) {
				cs = append(cs, cand{term, uint64(df)})
			}
		})
	} else {
		n, err := ix.idx.DocCount()
		if err != nil {
			return nil, fmt.Errorf("local index: %w", err)
		}
		maxDF = max(uint64(maxAbbrevShare*float64(n)), 20)
		d, err := ix.idx.FieldDictPrefix("symbol", []byte{w[0]})
		if err != nil {
			return nil, fmt.Errorf("symbol vocabulary: %w", err)
		}
		for {
			e, err := d.Next()
			if err != nil {
				d.Close()
				return nil, fmt.Errorf("symbol vocabulary: %w", err)
			}
			if e == nil {
				break
			}
			if fits(e.Term, e.Count) {
				cs = append(cs, cand{e.Term, e.Count})
			}
		}
		d.Close()
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(b.df, a.df), cmp.Compare(a.term, b.term)) })
	got = nil
	for _, c := range cs[:min(len(cs), maxAbbrevChecks)] {
		if len(got) == maxAbbrevs {
			break
		}
		n, err := ix.together(c.term, w)
		if err != nil {
			return nil, err
		}
		if n >= minTogether {
			got = append(got, c.term)
		}
	}
	ix.abbrevs.mu.Lock()
	if ix.abbrevs.m == nil {
		ix.abbrevs.m = map[string][]string{}
	}
	ix.abbrevs.m[w] = got
	ix.abbrevs.mu.Unlock()
	return got, nil
}

// together counts the chunks whose doc comment holds both a and w: a doc
// comment names its identifier and then says in words what it does, so an
// abbreviation and the word it stands for meet there, where two words that
// merely share letters (con and content) rarely do.
func (ix *Index) together(a, w string) (uint64, error) {
	if ix.memReady.Load() {
		return uint64(ix.mem.CoOccur(termindex.Doc, a, w)), nil
	}
	both := make([]query.Query, 0, 2)
	for _, t := range []string{a, w} {
		q := bleve.NewTermQuery(t)
		q.SetField("doc")
		both = append(both, q)
	}
	res, err := ix.idx.Search(bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(both...), 0, 0, false))
	if err != nil {
		return 0, fmt.Errorf("doc comments with %s and %s: %w", a, w, err)
	}
	return res.Total, nil
}

// subsequence reports whether a's bytes occur in w in order.
func subsequence(a, w string) bool {
	i := 0
	for j := 0; j < len(w) && i < len(a); j++ {
		if w[j] == a[i] {
			i++
		}
	}
	return i == len(a)
}

// expansion is a term added to a query, what it stands for and its weight
// (0: weights.Expand, an abbreviation's).
type expansion struct {
	term, from string
	weight     float64
}

// expand returns the abbreviations of terms not already among them.
func (ix *Index) expand(terms []string) ([]expansion, error) {
	have := make(map[string]bool, len(terms))
	for _, t := range terms {
		have[t] = true
	}
	var out []expansion
	add := func(w string) error {
		as, err := ix.abbreviations(w)
		for _, a := range as {
			if !have[a] {
				have[a] = true
				out = append(out, expansion{term: a, from: w})
			}
		}
		return err
	}
	for _, t := range terms {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shapedLike reports whether a is written as abbreviations are: the start
// of w (str, num, req), or w's first letter and then consonants only (cfg,
// msg, ctx, ptr). Letters that merely occur in order (sig in string, than
// in toolchain, pin in pointer) are no abbreviation.
func shapedLike(a, w string) bool {
	if strings.HasPrefix(w, a) {
		return true
	}
	return !strings.ContainsAny(a[1:], "aeiou")
}
