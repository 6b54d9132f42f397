package termindex

import "math/bits"

// Nearest chunks by vector. A question that names a thing by what it does
// ("throw away everything written") shares no word with the chunk that
// answers it ("Discard is a Writer on which all Write calls succeed"), so
// no clause scores it and it never reaches the pool the reranker reads.
// Each chunk may carry a vector (Chunk.Vector: the caller's, unit length,
// quantised to signed bytes); a query's Near vector brings the NearK
// chunks whose vectors lie nearest it into the hits beside the best by
// BM25F, among the chunks that match at least one clause: a chunk that
// shares no word with the question is not an answer anyone can check.

// maxDim bounds a vector's length: nearest keeps sign distances in a
// uint16.
const maxDim = 4096

// addVector keeps d's vector; a vector of another length than the first
// one the index took is not kept (an index holds one kind: the caller's
// vectors all come from one table), nor one longer than maxDim.
func (ix *Index) addVector(d uint32, v []int8) {
	if len(v) == 0 || len(v) > maxDim {
		return
	}
	if ix.dim == 0 {
		ix.dim = len(v)
	}
	if len(v) != ix.dim {
		return
	}
	ix.docs[d].vec = int32(len(ix.vecDocs))
	ix.vecDocs = append(ix.vecDocs, d)
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

// compactVectors drops dead chunks' vectors and renumbers the live
// ones', in place.
func (ix *Index) compactVectors() {
	dim, sw := ix.dim, signWords(ix.dim)
	n := 0
	for i, dn := range ix.vecDocs {
		d := &ix.docs[dn]
		if !d.live {
			continue
		}
		d.vec = int32(n)
		copy(ix.vecs[n*dim:(n+1)*dim], ix.vecs[i*dim:(i+1)*dim])
		copy(ix.signs[n*sw:(n+1)*sw], ix.signs[i*sw:(i+1)*sw])
		ix.vecDocs[n] = dn
		n++
	}
	ix.vecDocs, ix.vecs, ix.signs = ix.vecDocs[:n], ix.vecs[:n*dim], ix.signs[:n*sw]
}

// Dot8 is the dot product of two equally long signed-byte vectors, in
// integers, so exact in any order (replicas agree): for the candidates
// nearest scores, and the word vectors' cosines the reranker takes
// (retrieval's softCover), some 13,000 a search, and thousands for the
// nearest chunks. The first multiple of 16 bytes goes to dot8Blocks
// (SSE2 on amd64, 16 products an instruction pair), the rest to dot8Go.
func Dot8(a, b []int8) int32 {
	b = b[:len(a)]
	n := len(a) &^ 15
	var s int32
	if n > 0 {
		s = dot8Blocks(&a[0], &b[0], n)
	}
	return s + dot8Go(a[n:], b[n:])
}

// dot8Go is Dot8 in Go: eight products at a time, slices that shrink so
// the compiler drops the bounds checks.
func dot8Go(a, b []int8) int32 {
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
// at least: the rest are passed over by their signs alone.
const nearestScan = 60

// nearer orders the nearest: the larger dot product, then the smaller
// chunk id, so that which of two equally near chunks makes the cut does
// not depend on the order the index took them in (replicas agree).
func (ix *Index) nearer(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return ix.docs[a.doc].id < ix.docs[b.doc].id
}

// nearest returns the k chunks among those the query's clauses touched
// (so each shares a word with the question) that pass filters and whose
// vectors lie nearest q, nearest first. A dot product of every touched
// chunk's vector costs milliseconds on a large index; the signs' distance
// (appendSigns) picks the likeliest first: every chunk within the
// distance that takes in nearestScan·k of them (more when many lie at
// that distance, such as copies of one chunk) is scored exactly.
// The distance is approximate, so a chunk beyond it may be nearer than
// one within it.
func (ix *Index) nearest(s *scratch, q []int8, k int, filters []filter) []scored {
	if k <= 0 || len(q) != ix.dim || ix.dim == 0 {
		return nil
	}
	sw := signWords(ix.dim)
	qs := appendSigns(make([]uint64, 0, sw), q)
	if cap(s.dist) < len(ix.vecDocs) {
		s.dist = make([]uint16, len(ix.vecDocs))
	}
	dist := s.dist[:len(ix.vecDocs)] // a row's distance; dim+1: not a candidate (maxDim keeps it in a uint16)
	hist := make([]int, ix.dim+1)
next:
	for i, dn := range ix.vecDocs { // in the order they lie in memory
		dist[i] = uint16(ix.dim + 1)
		if s.cnt[dn] == 0 {
			continue // untouched (dead chunks never are)
		}
		if len(filters) > 0 { // out of scope: not a candidate, or it would take a place in the budget
			d := &ix.docs[dn]
			for _, f := range filters {
				if !d.holds(f) {
					continue next
				}
			}
		}
		d := 0
		for w, x := range ix.signs[i*sw : (i+1)*sw] {
			d += bits.OnesCount64(x ^ qs[w])
		}
		dist[i] = uint16(d)
		hist[d]++
	}
	limit, n := 0, 0 // score exactly those within limit: at least nearestScan·k of them
	for limit < ix.dim && n+hist[limit] < nearestScan*k {
		n += hist[limit]
		limit++
	}
	h := make(hitHeap, 0, k)
	dim := ix.dim
	for i, dn := range ix.vecDocs {
		if int(dist[i]) > limit {
			continue
		}
		x := scored{dn, float64(Dot8(q, ix.vecs[i*dim:(i+1)*dim]))}
		if len(h) < k {
			h = append(h, x)
			h.up(len(h)-1, ix.nearer)
		} else if ix.nearer(x, h[0]) {
			h[0] = x
			h.down(0, ix.nearer)
		}
	}
	h.sort(ix.nearer)
	return h
}

// addNearest appends to hits (the best by BM25F, scored with query norm
// qn) the chunks nearest q.Near that they lack, nearest first, and gives
// every hit its cosine with q.Near and, for the nearest, its rank among
// them.
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
		if v := int(ix.docs[dn].vec); v >= 0 {
			hits[i].Near = cosine8(Dot8(q.Near, ix.vecs[v*ix.dim:(v+1)*ix.dim]))
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
