package termindex

import (
	"math/bits"
	"slices"
)

// Nearest chunks by vector. A question that names a thing by what it does
// ("throw away everything written") shares no word with the chunk that
// answers it ("Discard is a Writer on which all Write calls succeed"), so
// no clause scores it and it never reaches the pool the reranker reads.
// Each chunk may carry a vector (Chunk.Vector: the caller's, unit length,
// quantised to signed bytes); a query's Near vector brings the NearK
// chunks whose vectors lie nearest it into the hits beside the best by
// BM25F, among the chunks that match at least one clause: a chunk that
// shares no word with the question is not an answer anyone can check.

// vecRow is one chunk's vector: the chunk's number and where its
// coordinates start in Index.vecs.
type vecRow struct {
	doc uint32
	off uint32
}

// addVector keeps d's vector; a vector of another length than the first
// one the index took is not kept (an index holds one kind).
func (ix *Index) addVector(d uint32, v []int8) {
	if len(v) == 0 {
		return
	}
	if ix.dim == 0 {
		ix.dim = len(v)
	}
	if len(v) != ix.dim {
		return
	}
	ix.docs[d].vec = int32(len(ix.vecRows))
	ix.vecRows = append(ix.vecRows, vecRow{doc: d, off: uint32(len(ix.vecs))})
	ix.vecs = append(ix.vecs, v...)
	ix.signs = appendSigns(ix.signs, v)
}

// signWords is the number of words of a vector's signs.
func signWords(dim int) int { return (dim + 63) / 64 }

// appendSigns appends v's signs, a bit a coordinate (1: negative): two
// vectors whose signs differ in fewer places tend to lie nearer, and
// counting the places costs a few instructions where the dot product
// costs a hundred (nearest).
func appendSigns(dst []uint64, v []int8) []uint64 {
	for w := 0; w < len(v); w += 64 {
		var x uint64
		for i, c := range v[w:min(w+64, len(v))] {
			if c < 0 {
				x |= 1 << i
			}
		}
		dst = append(dst, x)
	}
	return dst
}

// compactVectors drops dead chunks' vectors and renumbers the live ones'.
func (ix *Index) compactVectors() {
	rows, vecs := ix.vecRows[:0], make([]int8, 0, len(ix.vecs))
	for _, r := range ix.vecRows {
		d := &ix.docs[r.doc]
		if !d.live {
			continue
		}
		d.vec = int32(len(rows))
		rows = append(rows, vecRow{doc: r.doc, off: uint32(len(vecs))})
		vecs = append(vecs, ix.vecs[r.off:r.off+uint32(ix.dim)]...)
	}
	ix.vecRows, ix.vecs = rows, vecs
	ix.signs = ix.signs[:0]
	for _, r := range rows {
		ix.signs = appendSigns(ix.signs, ix.vecs[r.off:r.off+uint32(ix.dim)])
	}
}

// dot8 is the dot product of two equally long signed-byte vectors. The
// scan reads every chunk's vector (near): eight sums at a time, slices
// that shrink so the compiler drops the bounds checks.
func dot8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	for len(a) >= 8 && len(b) >= 8 {
		s0 += int32(a[0])*int32(b[0]) + int32(a[4])*int32(b[4])
		s1 += int32(a[1])*int32(b[1]) + int32(a[5])*int32(b[5])
		s2 += int32(a[2])*int32(b[2]) + int32(a[6])*int32(b[6])
		s3 += int32(a[3])*int32(b[3]) + int32(a[7])*int32(b[7])
		a, b = a[8:], b[8:]
	}
	for i := range a {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// cosine8 is the cosine of two unit vectors quantised to ±127.
func cosine8(dot int32) float64 { return float64(dot) / (127 * 127) }

// nearestScan is how many candidates per chunk asked for nearest scores
// exactly: the rest are passed over by their signs alone.
const nearestScan = 60

// nearest returns the k chunks among those the query's clauses touched
// (so each shares a word with the question) that pass filters and whose
// vectors lie nearest q, nearest first. A dot product of every touched
// chunk's vector costs milliseconds on a large index; the signs' distance
// (appendSigns) picks the nearestScan·k likeliest first, and only they are
// scored exactly.
func (ix *Index) nearest(s *scratch, q []int8, k int, filters []filter) []scored {
	if k <= 0 || len(q) != ix.dim || ix.dim == 0 {
		return nil
	}
	sw := signWords(ix.dim)
	qs := appendSigns(make([]uint64, 0, sw), q)
	if cap(s.dist) < len(ix.vecRows) {
		s.dist = make([]uint16, len(ix.vecRows))
	}
	dist := s.dist[:len(ix.vecRows)]
	hist := make([]int, ix.dim+2)
	const untouched = 0xffff
	for i, r := range ix.vecRows {
		if s.cnt[r.doc] == 0 {
			dist[i] = untouched
			continue
		}
		d := 0
		for w, x := range ix.signs[i*sw : (i+1)*sw] {
			d += bits.OnesCount64(x ^ qs[w])
		}
		dist[i] = uint16(d)
		hist[d]++
	}
	limit, n := 0, 0 // score exactly those within limit: at least nearestScan·k of them
	for limit < len(hist)-1 && n+hist[limit] < nearestScan*k {
		n += hist[limit]
		limit++
	}
	h := make(hitHeap, 0, k)
	dim := uint32(ix.dim)
next:
	for i, r := range ix.vecRows {
		if int(dist[i]) > limit {
			continue
		}
		x := scored{r.doc, float64(dot8(q, ix.vecs[r.off:r.off+dim]))}
		if len(h) == k && !better(x, h[0]) {
			continue
		}
		d := &ix.docs[r.doc]
		if !d.live {
			continue
		}
		for _, f := range filters {
			if !d.holds(f) {
				continue next
			}
		}
		if len(h) < k {
			h = append(h, x)
			h.up(len(h) - 1)
		} else {
			h[0] = x
			h.down(0)
		}
	}
	slices.SortFunc(h, func(a, b scored) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return h
}

// addNearest adds to hits (the best by BM25F, scored with query norm qn)
// the chunks nearest q.Near that they lack, and gives every hit its
// cosine with q.Near and, for the nearest, its rank among them.
func (ix *Index) addNearest(s *scratch, q *Query, hits []Hit, qn float64) []Hit {
	if q.NearK <= 0 || len(q.Near) == 0 || len(q.Near) != ix.dim {
		return hits
	}
	near := ix.nearest(s, q.Near, q.NearK, ix.filters(q.Filters))
	rank := make(map[uint32]int, len(near)) // equal cosines share a rank: two copies of a chunk rank alike
	for i, x := range near {
		rank[x.doc] = i + 1
		if i > 0 && x.score == near[i-1].score {
			rank[x.doc] = rank[near[i-1].doc]
		}
	}
	in := make(map[uint32]bool, len(hits))
	for i := range hits {
		dn := ix.byID[hits[i].ID]
		in[dn] = true
		hits[i].NearRank = rank[dn]
		if v := ix.docs[dn].vec; v >= 0 {
			r := ix.vecRows[v]
			hits[i].Near = cosine8(dot8(q.Near, ix.vecs[r.off:r.off+uint32(ix.dim)]))
		}
	}
	for _, x := range near {
		if in[x.doc] {
			continue
		}
		d := &ix.docs[x.doc]
		hits = append(hits, Hit{ID: d.id, Score: s.acc[x.doc] * qn, Meta: d.meta, Near: cosine8(int32(x.score)), NearRank: rank[x.doc]})
	}
	return hits
}
