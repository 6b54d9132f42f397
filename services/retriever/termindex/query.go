package termindex

import (
	"cmp"
	"math"
	"slices"
)

// Term is a term looked up in one text field with a boost.
type Term struct {
	Field int
	Term  string
	Boost float64
}

// Clause is a disjunction of terms: its score is the sum of its matched
// terms' scores times the share of its terms that matched (bleve's
// disjunction coordination).
type Clause []Term

// Keyword is a keyword field value with a boost, for a should clause.
type Keyword struct {
	Field int
	Value string
	Boost float64
}

// Should is a disjunction of keyword terms that adds to a chunk's score
// without being required.
type Should []Keyword

// Filter keeps chunks whose keyword field holds one of Values.
type Filter struct {
	Field  int
	Values []string
}

// Query is what the retriever asks: Clauses must match (at least one of
// them: they form a disjunction scaled by the share that matched), Should
// clauses add a bonus (a disjunction scaled the same way over the should
// clauses), Filters must hold and do not score.
type Query struct {
	Clauses []Clause
	Should  []Should
	Filters []Filter
	// MeanLength normalises a field's length by its mean length over the
	// chunks (textbook BM25). Otherwise by bleve's figure: the field's
	// vocabulary size over the chunk count, rounded up (bleve sums its
	// segments' vocabularies, so its figure also follows the segment layout).
	MeanLength bool
	// AvgLength, when set and not 0 for a field (by name), replaces the
	// average length: a test sets bleve's own figure to compare scores.
	AvgLength func(field string) float64
	// K1 and B replace BM25's parameters (bleve's K1 and B) when not 0.
	K1, B float64
	// Coord raises the share of clauses a chunk matched to this power
	// before it scales the chunk's score (bleve: 1, taken for 0).
	Coord float64
	// IDF is the power of a term's idf in its weight (bleve: 2, the idf
	// of the term's score times the idf of the query's term; taken for 0).
	IDF float64
	// Near, when it has the chunks' vectors' length, appends to the hits
	// the NearK chunks whose vectors lie nearest it, as nearest finds
	// them (near.go: among the touched chunks that pass Filters, by an
	// approximate first pick), that the best k lack.
	Near  []int8
	NearK int
}

// FirstPass ranks the chunks that pass Filters by the query's clauses
// alone, takes the best K, and lets Should turn them into should clauses
// for the main pass (the retriever's package-doc lookup).
type FirstPass struct {
	Filters []Filter
	K       int
	Should  func(hits []Hit) []Should
}

// Hit is a scored chunk.
type Hit struct {
	ID    string
	Score float64
	Meta  any
	// Near is the cosine of the chunk's vector with Query.Near (0 without
	// either), NearRank its rank among the NearK nearest (0: not among them).
	Near     float64
	NearRank int
}

type scratch struct {
	acc      []float64
	cnt      []uint16
	csum     []float64
	ccnt     []uint16
	touched  []uint32
	ctouched []uint32
	bsum     []float64 // should bonus, see addBonus
	bcnt     []uint16
	btouched []uint32
	dist     []uint16 // by vector row: the signs' distance from the query's, see nearest
}

// fold adds one clause of n terms to the sums: each chunk the clause
// touched gets the clause's sum scaled by the share of its terms it
// matched (bleve's coordination), and one more matched clause in cnt;
// touched lists the chunks sum holds, and is returned grown. The clause's
// own accumulators are cleared for the next one.
func (s *scratch) fold(n int, sum []float64, cnt []uint16, touched []uint32) []uint32 {
	nt := float64(n)
	for _, d := range s.ctouched {
		if cnt[d] == 0 {
			touched = append(touched, d)
		}
		sum[d] += s.csum[d] * (float64(s.ccnt[d]) / nt)
		cnt[d]++
		s.csum[d], s.ccnt[d] = 0, 0
	}
	s.ctouched = s.ctouched[:0]
	return touched
}

func (ix *Index) scratch() *scratch {
	s, _ := ix.pool.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if n := len(ix.docs); len(s.acc) < n {
		n += n / 8
		s.acc, s.cnt = make([]float64, n), make([]uint16, n)
		s.csum, s.ccnt = make([]float64, n), make([]uint16, n)
		s.bsum, s.bcnt = nil, nil
	}
	return s
}

func (ix *Index) release(s *scratch) {
	for _, d := range s.touched {
		s.acc[d], s.cnt[d] = 0, 0
	}
	s.touched = s.touched[:0]
	ix.pool.Put(s)
}

// idf is bleve's BM25 idf.
func idf(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

func (ix *Index) avgLen(field int, mean bool) float64 {
	if ix.live == 0 {
		return 1
	}
	if mean {
		return max(ix.text[field].sumLen/float64(ix.live), 1)
	}
	return math.Ceil(float64(ix.text[field].vocab) / float64(ix.live))
}

func (ix *Index) keywordAvgLen(field int) float64 {
	if ix.live == 0 {
		return 1
	}
	return math.Ceil(float64(ix.kw[field].vocab) / float64(ix.live))
}

// Search runs q (after first, when given) and returns the best k chunks,
// best first, ties in index order, then those q.Near adds. Scores are
// bleve's for the same query.
func (ix *Index) Search(q Query, first *FirstPass, k int) []Hit {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(q.Clauses) == 0 || ix.live == 0 {
		return nil
	}
	s := ix.scratch()
	defer ix.release(s)
	n := ix.live
	var avg [NumText]float64
	for f := range NumText {
		avg[f] = ix.avgLen(f, q.MeanLength)
		if q.AvgLength != nil {
			if a := q.AvgLength(TextFieldNames[f]); a > 0 {
				avg[f] = a
			}
		}
	}
	// The clauses' sum of squared weights, for bleve's query norm.
	var sumSq float64
	for _, c := range q.Clauses {
		for _, t := range c {
			w := t.Boost * idf(n, ix.docFreq(t.Field, t.Term))
			sumSq += w * w
		}
	}
	ix.scoreClauses(s, q.Clauses, avg, cmp.Or(q.K1, K1), cmp.Or(q.B, B), cmp.Or(q.Coord, 1), cmp.Or(q.IDF, 2))
	if first != nil {
		hits := ix.top(s, first.Filters, first.K, nil, 1)
		if sh := first.Should(hits); len(sh) > 0 {
			q.Should = append(slices.Clip(q.Should), sh...)
		}
	}
	// Should leaves count in the norm too.
	var bonus []shouldScore
	for _, c := range q.Should {
		var ks []kwScore
		for _, kt := range c {
			i := idf(n, ix.kw[kt.Field].count(kt.Value))
			sumSq += (kt.Boost * i) * (kt.Boost * i)
			avgdl := ix.keywordAvgLen(kt.Field)
			if q.AvgLength != nil {
				if a := q.AvgLength(KeywordFieldNames[kt.Field]); a > 0 {
					avgdl = a
				}
			}
			// A keyword field holds one token: tf 1, length 1.
			ks = append(ks, kwScore{field: kt.Field, value: ix.kw[kt.Field].id(kt.Value), score: kt.Boost * i * i * K1 / (1 + K1*(1-B+B/avgdl))})
		}
		bonus = append(bonus, shouldScore{terms: ks})
	}
	qn := 1 / math.Sqrt(sumSq)
	return ix.addNearest(s, &q, ix.top(s, q.Filters, k, bonus, qn), qn)
}

type kwScore struct {
	field int
	value uint32
	score float64 // without the query norm
}

type shouldScore struct{ terms []kwScore }

// scoreClauses accumulates each touched chunk's score from the clauses
// (without the query norm, a common factor applied in top).
func (ix *Index) scoreClauses(s *scratch, clauses []Clause, avg [NumText]float64, k1, bb, coord, idfPow float64) {
	n := ix.live
	for _, c := range clauses {
		for _, t := range c {
			tf := &ix.text[t.Field]
			id, ok := tf.ids[t.Term]
			if !ok || tf.df[id] == 0 {
				continue
			}
			i := idf(n, int(tf.df[id]))
			w := t.Boost * i * i
			if idfPow != 2 {
				w = t.Boost * math.Pow(i, idfPow)
			}
			a := k1 * (1 - bb)
			b := k1 * bb / avg[t.Field]
			for _, p := range tf.post[id] {
				d := &ix.docs[p.doc]
				if !d.live {
					continue
				}
				var x float64
				if p.tf < uint32(len(sqrtCache)) {
					x = sqrtCache[p.tf]
				} else {
					x = math.Sqrt(float64(p.tf))
				}
				sc := w * (x * k1) / (x + (a + b*d.lens[t.Field]))
				if s.ccnt[p.doc] == 0 {
					s.ctouched = append(s.ctouched, p.doc)
				}
				s.csum[p.doc] += sc
				s.ccnt[p.doc]++
			}
		}
		s.touched = s.fold(len(c), s.acc, s.cnt, s.touched)
	}
	share := make([]float64, len(clauses)+1) // by clauses matched
	for i := range share {
		share[i] = math.Pow(float64(i)/float64(len(clauses)), coord)
	}
	for _, d := range s.touched {
		s.acc[d] *= share[s.cnt[d]]
	}
}

// addBonus adds the should clauses' bonus to the matched chunks' scores,
// walking the chunks that hold each value (a package's few chunks) rather
// than checking every matched chunk: bleve's disjunction of the clauses,
// each a disjunction of its values.
func (ix *Index) addBonus(s *scratch, bonus []shouldScore) {
	if len(bonus) == 0 {
		return
	}
	if len(s.bsum) < len(s.acc) {
		s.bsum, s.bcnt = make([]float64, len(s.acc)), make([]uint16, len(s.acc))
	}
	for _, b := range bonus {
		for _, kt := range b.terms {
			if kt.value == noValue {
				continue
			}
			for _, d := range ix.kw[kt.field].post[kt.value] {
				if s.cnt[d] == 0 {
					continue
				}
				if s.ccnt[d] == 0 {
					s.ctouched = append(s.ctouched, d)
				}
				s.csum[d] += kt.score
				s.ccnt[d]++
			}
		}
		s.btouched = s.fold(len(b.terms), s.bsum, s.bcnt, s.btouched)
	}
	ns := float64(len(bonus))
	for _, d := range s.btouched {
		s.acc[d] += s.bsum[d] * (float64(s.bcnt[d]) / ns)
		s.bsum[d], s.bcnt[d] = 0, 0
	}
	s.btouched = s.btouched[:0]
}

// sqrtCache is bleve's table of square roots of small term frequencies.
var sqrtCache = func() []float64 {
	c := make([]float64, 64)
	for i := range c {
		c[i] = math.Sqrt(float64(i))
	}
	return c
}()

// filter is a Filter with its values' numbers.
type filter struct {
	field  int
	values []uint32
}

func (ix *Index) filters(fs []Filter) []filter {
	out := make([]filter, len(fs))
	for i, f := range fs {
		out[i].field = f.Field
		for _, v := range f.Values {
			out[i].values = append(out[i].values, ix.kw[f.Field].id(v))
		}
	}
	return out
}

func (d *doc) holds(f filter) bool {
	for _, v := range d.keywords(f.field) {
		if slices.Contains(f.values, v) {
			return true
		}
	}
	return false
}

// top returns the best k touched chunks that pass filters, each scored
// (clauses + should bonus) × qn.
func (ix *Index) top(s *scratch, fs []Filter, k int, bonus []shouldScore, qn float64) []Hit {
	if k <= 0 {
		return nil
	}
	filters := ix.filters(fs)
	ix.addBonus(s, bonus)
	// The candidates: the touched chunks, or the chunks holding a filter's
	// value when they are fewer (the package docs of the first pass).
	cands := s.touched
	drive := -1
	for i, f := range filters {
		if len(f.values) == 1 {
			if f.values[0] == noValue {
				return nil
			}
			if l := ix.kw[f.field].post[f.values[0]]; len(l) < len(cands) {
				cands, drive = l, i
			}
		}
	}
	h := make(hitHeap, 0, k)
next:
	for _, dn := range cands {
		if s.cnt[dn] == 0 {
			continue // not matched (or, driving by a filter, dead)
		}
		if len(filters) > 0 {
			d := &ix.docs[dn]
			for i, f := range filters {
				if i != drive && !d.holds(f) {
					continue next
				}
			}
		}
		sc := s.acc[dn] * qn
		if len(h) < k {
			h = append(h, scored{dn, sc})
			h.up(len(h)-1, better)
		} else if better(scored{dn, sc}, h[0]) {
			h[0] = scored{dn, sc}
			h.down(0, better)
		}
	}
	h.sort(better)
	out := make([]Hit, len(h))
	for i, x := range h {
		d := &ix.docs[x.doc]
		out[i] = Hit{ID: d.id, Score: x.score, Meta: d.meta}
	}
	return out
}

type scored struct {
	doc   uint32
	score float64
}

// better: higher score, then earlier in the index.
func better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.doc < b.doc
}

// hitHeap keeps the best hits found so far by an order (better, or
// nearest's nearer: a before b when a is better), the worst kept on top.
// The caller compares a new hit with h[0] itself: that comparison runs
// for every candidate, the sifts only when the heap changes.
type hitHeap []scored

func (h hitHeap) up(i int, before func(a, b scored) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h[p], h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (h hitHeap) down(i int, before func(a, b scored) bool) {
	for {
		w := i
		if l := 2*i + 1; l < len(h) && before(h[w], h[l]) {
			w = l
		}
		if r := 2*i + 2; r < len(h) && before(h[w], h[r]) {
			w = r
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// sort orders h best first.
func (h hitHeap) sort(before func(a, b scored) bool) {
	slices.SortFunc(h, func(a, b scored) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
}
