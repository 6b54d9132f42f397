package retrieval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/blevesearch/bleve/v2"
)

// A question says in its own words what the code's doc comments say in
// theirs: "interrupt" where the doc says signal, "whitespace" where the
// symbol says Trim. related learns, from the index itself, the words a doc
// comment uses together with a question word more often than chance: the
// co-occurrence statistics behind word vectors, first order (pointwise
// mutual information), computed per question word when it is first asked
// and cached until the next index batch, like the abbreviations
// (expand.go). Nothing is trained or stored at index time: the statistics
// are read from the index every replica builds from the same bucket, so
// replicas agree, and they follow the code as files change (a batch drops
// the cache).
//
// For a query term w found in at least minRelatedDF and at most
// maxRelatedShare of the doc comments: the relatedSample doc comments
// that match w best are read (the comment and the chunk's symbol words,
// analyzed), and a word t of theirs is related to w when it occurs in at
// least minRelatedCount of them, is not too common itself
// (maxRelatedShare), and its share there is at least weights.RelatedLift times
// its share among all doc comments (PMI ≥ log weights.RelatedLift). The best
// maxRelated by count × PMI are added to the query at weights.Related, in
// the short fields only, as abbreviations are.
const (
	minRelatedDF    = 3
	maxRelatedShare = 0.02
	relatedSample   = 60
	minRelatedCount = 3
	maxRelated      = 2
)

// relatedCache holds the related words found per query term; dropped
// whenever a batch changes the index.
type relatedCache struct {
	mu sync.Mutex
	m  map[string][]string
}

func (c *relatedCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

// related returns the words related to w, as above.
func (ix *Index) related(w string) ([]string, error) {
	if len(w) < 3 {
		return nil, nil
	}
	c := &ix.relatedWords
	c.mu.Lock()
	got, ok := c.m[w]
	c.mu.Unlock()
	if ok {
		return got, nil
	}
	got, err := ix.learnRelated(w)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string][]string{}
	}
	c.m[w] = got
	c.mu.Unlock()
	return got, nil
}

func (ix *Index) learnRelated(w string) ([]string, error) {
	r, err := ix.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	n, err := r.DocCount()
	if err != nil {
		return nil, fmt.Errorf("local index: %w", err)
	}
	docDF := func(t string) (uint64, error) {
		tfr, err := r.TermFieldReader(context.Background(), []byte(t), "doc", false, false, false)
		if err != nil {
			return 0, fmt.Errorf("doc term %q: %w", t, err)
		}
		defer tfr.Close()
		return tfr.Count(), nil
	}
	maxDF := max(uint64(maxRelatedShare*float64(n)), 20) // a small index: every word is rare
	dfw, err := docDF(w)
	if err != nil || dfw < minRelatedDF || dfw > maxDF {
		return nil, err
	}
	q := bleve.NewTermQuery(w)
	q.SetField("doc")
	sr := bleve.NewSearchRequestOptions(q, relatedSample, 0, false)
	sr.Fields = []string{"content", "symbol", "language"}
	res, err := ix.idx.Search(sr)
	if err != nil {
		return nil, fmt.Errorf("doc comments with %s: %w", w, err)
	}
	count := map[string]int{}
	for _, h := range res.Hits {
		text := leadingComment(str(h.Fields["language"]), str(h.Fields["content"])) + "\n" + str(h.Fields["symbol"])
		for _, t := range queryTerms(text, math.MaxInt) {
			count[t]++
		}
	}
	s := float64(len(res.Hits))
	type cand struct {
		term  string
		score float64
	}
	var cs []cand
	for t, c := range count {
		if t == w || c < minRelatedCount || len(t) < 3 || isNumber(t) {
			continue
		}
		df, err := docDF(t)
		if err != nil {
			return nil, err
		}
		if df == 0 || df > maxDF {
			continue
		}
		lift := (float64(c) / s) / (float64(df) / float64(n))
		if lift < weights.RelatedLift {
			continue
		}
		cs = append(cs, cand{t, float64(c) * math.Log(lift)})
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.term, b.term)) })
	var out []string
	for _, c := range cs[:min(len(cs), maxRelated)] {
		out = append(out, c.term)
	}
	return out, nil
}

func isNumber(t string) bool {
	for _, r := range t {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// relatedTerms returns the related words of terms that are neither among
// them nor already added (have: the terms and the abbreviations so far),
// at weights.Related.
func (ix *Index) relatedTerms(terms []string, have []expansion) ([]expansion, error) {
	seen := make(map[string]bool, len(terms)+len(have))
	for _, t := range terms {
		seen[t] = true
	}
	for _, e := range have {
		seen[e.term] = true
	}
	var out []expansion
	for _, t := range terms {
		rs, err := ix.related(t)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if !seen[r] {
				seen[r] = true
				out = append(out, expansion{term: r, from: t, weight: weights.Related})
			}
		}
	}
	return out, nil
}
