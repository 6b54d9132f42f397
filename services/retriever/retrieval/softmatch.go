package retrieval

import (
	"cmp"
	"math/bits"
	"path"
	"slices"
	"sync"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// softCover is, for each hit, how much of the question its symbol and doc
// comment say, word by word, in the same words or in near ones: each of the
// question's words counts the cosine of its vector with the nearest word's
// of the hit (1 when the hit holds the word or one of its expansions, 0
// when nothing lies nearer than at a right angle), weighed by its idf, as
// a share of the question. The shares (fSymbol, fDoc...) count a word only
// when the chunk holds it; the similarities compare the sums of all words,
// where one strong word is lost among the others. "does a type meet a
// type parameter's constraint" has no word of "Satisfies reports whether
// type V satisfies the constraint T" but *type* and *constraint*, and
// *meet* lies near *satisfies*. Two readings: over the symbol and the
// whole doc comment (doc), and over the symbol and the doc comment's first
// sentence (summary); each a share per hit and what each word counts (a
// hit's len(groups) in a row), which the file's reading gathers. nil when
// nothing reads them, as for similarities.
func (ix *Index) softCover(hits []termindex.Hit, groups [][]string, idf []float64, matched []termindex.Match) *softCovers {
	if !readsSoftCover() {
		return nil
	}
	total := sum(idf)
	if total == 0 {
		return nil
	}
	nw := newNearWords(groups)
	defer nw.release()
	// a word the hit holds counts 1: its near words are not looked at
	needDoc, needSummary := unheld(matched, len(groups), termindex.Symbol, termindex.Doc), unheld(matched, len(groups), termindex.Symbol, termindex.Summary)
	needSymbol := make([]uint64, len(hits))
	for i := range hits {
		needSymbol[i] = needDoc[i] | needSummary[i]
	}
	sym, whole, first := ix.nearest(nw, hits, termindex.Symbol, needSymbol), ix.nearest(nw, hits, termindex.Doc, needDoc), ix.nearest(nw, hits, termindex.Summary, needSummary)
	g := len(groups)
	sc := &softCovers{doc: make([]float64, len(hits)), summary: make([]float64, len(hits)), docWords: make([]float64, len(hits)*g), summaryWords: make([]float64, len(hits)*g)}
	for i := range hits {
		m := matched[i].Fields
		sc.doc[i] = cover(sc.docWords[i*g:(i+1)*g], m[termindex.Symbol]|m[termindex.Doc], idf, total, sym[i], whole[i])
		sc.summary[i] = cover(sc.summaryWords[i*g:(i+1)*g], m[termindex.Symbol]|m[termindex.Summary], idf, total, sym[i], first[i])
	}
	return sc
}

// softCovers are softCover's readings of a pool.
type softCovers struct {
	doc, summary           []float64 // per hit: the share of the question
	docWords, summaryWords []float64 // per hit, per question word: what it counts
}

// readsSoftCover reports whether the ranking reads a soft cover.
func readsSoftCover() bool {
	w := weights.Rerank
	return w[fSoftDoc] != 0 || w[fSoftSummary] != 0 || w[fSoftDocOfBest] != 0 || w[fSoftFile] != 0 || w[fSoftFileSummary] != 0 || w[fSoftPkg] != 0 || len(weights.Forest) > 0 || tracePool != nil
}

// cover fills words with what each of the question's words counts (1 held,
// else its best cosine among fields' nearest words; fields may be nil)
// and returns their share of the question (idfShare).
func cover(words []float64, held uint64, idf []float64, total float64, fields ...nearestWords) float64 {
	for g := range words {
		c := 0.0
		if held&(1<<g) != 0 {
			c = 1
		} else {
			for _, f := range fields {
				if f != nil {
					c = max(c, f[g].cos)
				}
			}
		}
		words[g] = c
	}
	return idfShare(words, idf, total)
}

// idfShare is the share of the question that words (what each of its
// words counts, 0 to 1) say, each word weighed by its idf; total is the
// idfs' sum, not 0.
func idfShare(words, idf []float64, total float64) float64 {
	var s float64
	for g, c := range words {
		s += idf[g] * c
	}
	return s / total
}

// unheld is, for each hit, the question's words (bits of its groups
// words) that none of fields holds: those whose near words are looked up.
func unheld(matched []termindex.Match, words int, fields ...int) []uint64 {
	all := uint64(1)<<words - 1 // termGroups keeps at most 64
	out := make([]uint64, len(matched))
	for i, m := range matched {
		var held uint64
		for _, f := range fields {
			held |= m.Fields[f]
		}
		out[i] = all &^ held
	}
	return out
}

// sum is the sum of xs.
func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// softPackages is, for each package doc of pkgs (the first pass's, best
// first, by directory), softCover's summary reading of it: how much of the
// question its name and first sentence say in the same or near words.
// "LZW compressor" meets "Package lzw implements the Lempel-Ziv-Welch
// compressed data format" in *compress* and *lzw*; "squeeze" would only
// come near. A second doc of a package is passed over, as in
// packageEvidence.
func (ix *Index) softPackages(pkgs []termindex.Hit, groups [][]string, idf []float64) map[string]float64 {
	if len(pkgs) == 0 || !readsSoftCover() {
		return nil
	}
	total := sum(idf)
	if total == 0 {
		return nil
	}
	m := make([]termindex.Match, len(pkgs))
	ix.mem.Matched(pkgs, groups, m)
	nw := newNearWords(groups)
	defer nw.release()
	need := unheld(m, len(groups), termindex.Summary)
	first := ix.nearest(nw, pkgs, termindex.Summary, need)
	words := make([]float64, len(groups))
	out := make(map[string]float64, len(pkgs))
	for i, h := range pkgs {
		d := path.Dir(h.Meta.(*memMeta).file)
		if _, ok := out[d]; ok {
			continue
		}
		out[d] = cover(words, m[i].Fields[termindex.Summary], idf, total, first[i])
	}
	return out
}

// akinShown is the cosine from which explain shows a near word (akin):
// synonyms lie at 0.4 to 0.8 (folder~directori 0.56), most unrelated words
// below, though not every one (s~if 0.77: short, frequent words lie near
// many), and the reranker reads those too.
const akinShown = 0.4

// akin says, for each hit, which of the question's words its symbol and doc
// comment do not hold but say in a near word (softCover's reading), with
// that word and its cosine, the nearest first: why a chunk that shares
// few of the question's words ranks high. Only the first word of a group
// is the question's; an expansion held counts as the word held.
func (ix *Index) akin(hits []termindex.Hit, groups [][]string) [][]contracts.RagAkin {
	if len(hits) == 0 || len(groups) == 0 {
		return nil
	}
	matched := make([]termindex.Match, len(hits))
	ix.mem.Matched(hits, groups, matched)
	nw := newNearWords(groups)
	defer nw.release()
	need := unheld(matched, len(groups), termindex.Symbol, termindex.Doc)
	out := make([][]contracts.RagAkin, len(hits))
	fields := [...]int{termindex.Symbol, termindex.Doc}
	var near [len(fields)][]nearestWords
	for k, f := range fields {
		near[k] = ix.nearest(nw, hits, f, need)
	}
	for i := range hits {
		for g := range groups {
			if need[i]&(1<<g) == 0 {
				continue
			}
			best, field := nearestWord{}, -1
			for k, f := range fields {
				if n := near[k][i]; n != nil && n[g].cos > best.cos {
					best, field = n[g], f
				}
			}
			if best.cos >= akinShown {
				out[i] = append(out[i], contracts.RagAkin{Term: groups[g][0], Word: ix.mem.Term(field, best.id), Cosine: best.cos})
			}
		}
		slices.SortStableFunc(out[i], func(a, b contracts.RagAkin) int { return cmp.Compare(b.Cosine, a.Cosine) })
	}
	return out
}

// nearWords compares the question's words with a chunk's by their vectors,
// each cosine computed once a search, and only when asked: most of what
// the near words cost is these products, and finding a word's (a slot by
// its vector row, not a map: a search looks up tens of thousands). Kept
// in a pool with its buffers, which a search would otherwise grow anew.
type nearWords struct {
	vs    *vectors
	qrows []int32   // each question word's vector row, -1 for none
	slot  []int32   // by vector row: 1 + the row's place in rows, 0 for a row not seen yet (all 0 when pooled)
	rows  []int32   // the rows seen, in the order seen
	cos   []float64 // len(qrows) per row seen: its cosine with each question word, 0 below a right angle, -1 not computed yet
	fresh []float64 // a new row's: -1, or 0 for a question word without a vector
	// nearest's buffers: a field's words of the hits, with each one's hit
	hitOf []int
	ids   []uint32
}

var nearWordsPool = sync.Pool{New: func() any { return &nearWords{slot: make([]int32, len(wordVectors().scale))} }}

func newNearWords(groups [][]string) *nearWords {
	nw := nearWordsPool.Get().(*nearWords)
	nw.vs = wordVectors()
	nw.qrows, nw.fresh = nw.qrows[:0], nw.fresh[:0]
	for _, ts := range groups {
		row, ok := nw.vs.index[ts[0]]
		if !ok {
			nw.qrows, nw.fresh = append(nw.qrows, -1), append(nw.fresh, 0)
			continue
		}
		nw.qrows, nw.fresh = append(nw.qrows, row), append(nw.fresh, -1)
	}
	return nw
}

// release puts nw back in the pool, its slot table zeroed; nw is not used
// after.
func (nw *nearWords) release() {
	for _, r := range nw.rows {
		nw.slot[r] = 0
	}
	nw.rows, nw.cos = nw.rows[:0], nw.cos[:0]
	nw.vs = nil // a use after release fails rather than corrupts a pooled table
	nearWordsPool.Put(nw)
}

// cosines are row's cosines with the question's words, those of need
// computed (the others may be -1); valid until the next call.
func (nw *nearWords) cosines(row int32, need uint64) []float64 {
	n := len(nw.qrows)
	at := int(nw.slot[row]) - 1
	if at < 0 {
		at = len(nw.rows)
		nw.rows = append(nw.rows, row)
		nw.cos = append(nw.cos, nw.fresh...)
		nw.slot[row] = int32(at + 1)
	}
	c := nw.cos[at*n : (at+1)*n]
	vs := nw.vs
	r := vs.data[int(row)*vs.dim : int(row+1)*vs.dim]
	for m := need; m != 0; m &= m - 1 {
		g := bits.TrailingZeros64(m)
		if c[g] >= 0 {
			continue
		}
		q := nw.qrows[g]
		dot := termindex.Dot8(vs.data[int(q)*vs.dim:int(q+1)*vs.dim], r)
		c[g] = max(0, float64(dot)*float64(vs.scale[q])*float64(vs.scale[row]))
	}
	return c
}

// nearestWord is the word of a field nearest one of the question's: its
// term id in the field's dictionary (Summary: Doc's) and its cosine.
type nearestWord struct {
	id  uint32
	cos float64
}

// nearestWords are a hit's nearest word to each of the question's words;
// nil when none of its words in the field has a vector.
type nearestWords []nearestWord

// nearest finds, for each hit, the word of field nearest each of the
// question's words of need[i] (the others' entries may be anything). Of
// equally near words the first in the field's order
// is kept (term ids, sorted: the same on every replica for the cosine,
// which is all the features read).
func (ix *Index) nearest(nw *nearWords, hits []termindex.Hit, field int, need []uint64) []nearestWords {
	hitOf, ids := nw.hitOf[:0], nw.ids[:0]
	ix.mem.EachTermID(hits, field, func(i int, id uint32) { hitOf, ids = append(hitOf, i), append(ids, id) })
	nw.hitOf, nw.ids = hitOf, ids
	tv := ix.vecs.resolve(ix, field, ids)
	out := make([]nearestWords, len(hits))
	q := len(nw.qrows)
	var slab []nearestWord // every hit's nearest words, allocated once: EachTermID hands out hits in order, so at most len(hits)-i are left to need a row (out of order, it only allocates again)
	for k, t := range tv {
		if t.row < 0 {
			continue
		}
		i := hitOf[k]
		if need[i] == 0 {
			continue
		}
		if out[i] == nil {
			if len(slab) < q {
				slab = make([]nearestWord, q*(len(hits)-i))
			}
			out[i], slab = slab[:q:q], slab[q:]
		}
		c := nw.cosines(t.row, need[i])
		for m := need[i]; m != 0; m &= m - 1 {
			if g := bits.TrailingZeros64(m); c[g] > out[i][g].cos {
				out[i][g] = nearestWord{id: ids[k], cos: c[g]}
			}
		}
	}
	return out
}
