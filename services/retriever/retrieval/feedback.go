package retrieval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/blevesearch/bleve/v2/search"
)

// Pseudo-relevance feedback: when a question's words are not the code's,
// the first search's best chunks may still be near the answer, and their
// own words (their symbols and doc comments) name it. feedbackTerms takes
// the words that at least feedbackAgree of the first feedbackDocs hits
// share, that the question does not hold, and that are in at most
// maxRelatedShare of the doc comments (a distinctive word, not "return"),
// the rarest first, at most maxFeedback; the search is run again with them
// added at weights.Feedback, in the short fields, marked as expansions (of
// "+feedback"). It costs a second search.
const (
	feedbackDocs  = 3
	feedbackAgree = 2
	maxFeedback   = 3
	feedbackFrom  = "+feedback"
)

func (ix *Index) feedbackTerms(ctx context.Context, hits search.DocumentMatchCollection, terms []string, exps []expansion) ([]expansion, error) {
	have := make(map[string]bool, len(terms)+len(exps))
	for _, t := range terms {
		have[t] = true
	}
	for _, e := range exps {
		have[e.term] = true
	}
	count := map[string]int{}
	for _, h := range hits[:min(len(hits), feedbackDocs)] {
		text := leadingComment(str(h.Fields["language"]), str(h.Fields["content"])) + "\n" + str(h.Fields["symbol"])
		for _, t := range queryTerms(text, math.MaxInt) {
			count[t]++
		}
	}
	adv, err := ix.idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("local index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("local index reader: %w", err)
	}
	defer r.Close()
	n, err := r.DocCount()
	if err != nil {
		return nil, fmt.Errorf("local index: %w", err)
	}
	type cand struct {
		term string
		df   uint64
	}
	var cs []cand
	for t, c := range count {
		if c < feedbackAgree || have[t] || len(t) < 3 || isNumber(t) {
			continue
		}
		tfr, err := r.TermFieldReader(ctx, []byte(t), "doc", false, false, false)
		if err != nil {
			return nil, fmt.Errorf("doc term %q: %w", t, err)
		}
		df := tfr.Count()
		tfr.Close()
		if df > 0 && float64(df) <= maxRelatedShare*float64(n) {
			cs = append(cs, cand{t, df})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(a.df, b.df), cmp.Compare(a.term, b.term)) })
	var out []expansion
	for _, c := range cs[:min(len(cs), maxFeedback)] {
		out = append(out, expansion{term: c.term, from: feedbackFrom, weight: weights.Feedback})
	}
	return out, nil
}
