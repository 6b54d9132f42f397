package retrieval

import (
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
// sentence (summary). nil when nothing reads them, as for similarities.
func (ix *Index) softCover(hits []termindex.Hit, groups [][]string, idf []float64, matched []termindex.Match) (doc, summary []float64) {
	w := weights.Rerank
	if w[fSoftDoc] == 0 && w[fSoftSummary] == 0 && w[fSoftDocOfBest] == 0 && len(weights.Forest) == 0 && tracePool == nil {
		return nil, nil
	}
	vs := wordVectors()
	var total float64
	for _, x := range idf {
		total += x
	}
	if total == 0 {
		return nil, nil
	}
	qrows := make([]int32, len(groups)) // each question word's vector row, -1 for none
	for g, ts := range groups {
		qrows[g] = -1
		if row, ok := vs.index[ts[0]]; ok {
			qrows[g] = row
		}
	}
	near := map[int32][]float64{} // a word's vector row: its cosine with each question word
	cosines := func(row int32) []float64 {
		if c, ok := near[row]; ok {
			return c
		}
		c := make([]float64, len(groups))
		r := vs.data[int(row)*vs.dim : int(row+1)*vs.dim]
		for g, q := range qrows {
			if q < 0 {
				continue
			}
			var dot int32 // exact: every replica and CPU agree
			for k, x := range vs.data[int(q)*vs.dim : int(q+1)*vs.dim] {
				dot += int32(x) * int32(r[k])
			}
			c[g] = max(0, float64(dot)*float64(vs.scale[q])*float64(vs.scale[row]))
		}
		near[row] = c
		return c
	}
	best := func(field int) [][]float64 { // each hit's best cosine per question word in field
		var hitOf []int
		var ids []uint32
		ix.mem.EachTermID(hits, field, func(i int, id uint32) { hitOf, ids = append(hitOf, i), append(ids, id) })
		tv := ix.vecs.resolve(ix, field, ids)
		out := make([][]float64, len(hits))
		for k, t := range tv {
			if t.row < 0 {
				continue
			}
			i := hitOf[k]
			if out[i] == nil {
				out[i] = make([]float64, len(groups))
			}
			for g, c := range cosines(t.row) {
				out[i][g] = max(out[i][g], c)
			}
		}
		return out
	}
	sym, whole, first := best(termindex.Symbol), best(termindex.Doc), best(termindex.Summary)
	cover := func(i int, held uint64, fields ...[][]float64) float64 {
		var s float64
		for g := range groups {
			c := 0.0
			if held&(1<<g) != 0 {
				c = 1
			} else {
				for _, f := range fields {
					if f[i] != nil {
						c = max(c, f[i][g])
					}
				}
			}
			s += idf[g] * c
		}
		return s / total
	}
	doc, summary = make([]float64, len(hits)), make([]float64, len(hits))
	for i := range hits {
		m := matched[i].Fields
		doc[i] = cover(i, m[termindex.Symbol]|m[termindex.Doc], sym, whole)
		summary[i] = cover(i, m[termindex.Symbol]|m[termindex.Summary], sym, first)
	}
	return doc, summary
}
