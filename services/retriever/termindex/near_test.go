package termindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// vec is a unit vector along axis a (and b, at 45°), quantised as the
// retriever quantises.
func vec(a, b int) []int8 {
	v := make([]int8, 4)
	if a == b {
		v[a] = 127
		return v
	}
	v[a], v[b] = 90, 90
	return v
}

// randomVec is a random unit vector of dim coordinates, quantised.
func randomVec(r *rand.Rand, dim int) []int8 {
	f := make([]float64, dim)
	var ss float64
	for i := range f {
		f[i] = r.NormFloat64()
		ss += f[i] * f[i]
	}
	v := make([]int8, dim)
	for i := range f {
		v[i] = int8(math.Round(127 * f[i] / math.Sqrt(ss)))
	}
	return v
}

func withVec(c Chunk, v []int8) Chunk { c.Vector = v; return c }

// TestNearestJoinsHits: the chunk nearest the question in meaning joins
// the best by BM25F even when BM25F cuts it, with its own score, its
// cosine and rank; a chunk that matches no clause never joins however near
// it lies, nor one a filter excludes; every hit carries its cosine.
func TestNearestJoinsHits(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{
		withVec(chunk("strong", "a", "copy", "copy copy copy data"), vec(0, 1)),
		withVec(chunk("weak", "a", "discard", "writer copy"), vec(1, 1)),
	})
	u.Replace("b", "1", []Chunk{withVec(chunk("silent", "b", "sink", "nothing here"), vec(1, 1))})
	other := withVec(chunk("elsewhere", "c", "drop", "copy all"), vec(1, 1))
	other.Keyword[Workspace] = []string{"other"}
	u.Replace("c", "1", []Chunk{other})
	ix.Apply(&u)

	q := words("copy")
	q.Filters = []Filter{{Field: Workspace, Values: []string{"ws"}}}
	plain := ix.Search(q, nil, 1)
	if len(plain) != 1 || plain[0].ID != "strong" || plain[0].NearRank != 0 || plain[0].Near != 0 {
		t.Fatalf("without Near: %+v", plain)
	}
	q.Near, q.NearK = vec(1, 1), 1
	got := ix.Search(q, nil, 1)
	if len(got) != 2 || got[0].ID != "strong" || got[1].ID != "weak" {
		t.Fatalf("with Near: %v, want [strong weak]", ids(got))
	}
	if got[1].NearRank != 1 || math.Abs(got[1].Near-1) > 1e-9 || got[1].Score <= 0 || got[1].Score >= got[0].Score {
		t.Errorf("the joined hit: %+v", got[1])
	}
	if got[0].NearRank != 0 || math.Abs(got[0].Near-90/127.0) > 1e-9 {
		t.Errorf("the BM25F hit, at 45° from the question: %+v", got[0])
	}
	whole := ix.Search(q, nil, 10)
	if len(whole) != 2 || whole[0].NearRank != 0 || whole[1].NearRank != 1 || math.Abs(whole[1].Near-1) > 1e-9 {
		t.Errorf("both by BM25F already: %+v", whole)
	}
	q.Near = []int8{1, 2, 3} // another length: ignored
	if got := ix.Search(q, nil, 1); len(got) != 1 {
		t.Errorf("a vector of another length: %v", ids(got))
	}
}

// TestNearestAgainstExact: on random vectors of the retriever's length,
// with a filter, the signs' first pick keeps what an exact search over
// every touched chunk in scope finds, and the planted nearest first.
func TestNearestAgainstExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const dim, n, k = 100, 6000, 10
	ix := New()
	var u Update
	vecs := map[string][]int8{}
	q := randomVec(r, dim)
	for i := range n {
		id := "c" + strconv.Itoa(i)
		v := randomVec(r, dim)
		if i == 4320 { // planted: the question's own direction, slightly off
			v = slices.Clone(q)
			v[0] /= 2
		}
		c := withVec(chunk(id, id, "x", "word"), v)
		if i%2 == 1 {
			c.Keyword[Workspace] = []string{"other"}
		}
		vecs[id] = v
		u.Replace(id, "1", []Chunk{c})
	}
	ix.Apply(&u)
	query := words("word")
	query.Filters = []Filter{{Field: Workspace, Values: []string{"ws"}}}
	query.Near, query.NearK = q, k
	var got []string
	for _, h := range ix.Search(query, nil, 1) {
		if h.NearRank > 0 {
			got = append(got, h.ID)
		}
	}
	type sc struct {
		id  string
		dot int32
	}
	var exact []sc
	for id, v := range vecs {
		if n, _ := strconv.Atoi(id[1:]); n%2 == 0 {
			exact = append(exact, sc{id, Dot8(q, v)})
		}
	}
	slices.SortFunc(exact, func(a, b sc) int {
		if a.dot != b.dot {
			return int(b.dot - a.dot)
		}
		return cmpString(a.id, b.id)
	})
	if len(got) < k-1 || !slices.Contains(got, "c4320") {
		t.Fatalf("nearest %v, want %d including c4320", got, k)
	}
	kept := 0
	for _, e := range exact[:k] {
		if slices.Contains(got, e.id) {
			kept++
		}
	}
	if kept < k-2 {
		t.Errorf("the signs' pick kept %d of the exact %d nearest: %v against %v", kept, k, got, exact[:k])
	}
	for _, id := range got {
		if n, _ := strconv.Atoi(id[1:]); n%2 == 1 {
			t.Errorf("%s is out of the filter's scope", id)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestNearestFollowsUpdates: a replaced or deleted chunk's vector is no
// longer found, and every live chunk keeps its own vector after
// compaction renumbers the rows.
func TestNearestFollowsUpdates(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ix := New()
	want := map[string][]int8{}
	var u Update
	for i := range 3000 {
		id := "f" + strconv.Itoa(i)
		want[id] = randomVec(r, 16)
		u.Replace(id, "1", []Chunk{withVec(chunk(id, id, "x", "word"), want[id])})
	}
	ix.Apply(&u)
	nearestTo := func(v []int8) Hit {
		q := words("word")
		q.Near, q.NearK = v, 1
		for _, h := range ix.Search(q, nil, 1) {
			if h.NearRank == 1 {
				return h
			}
		}
		return Hit{}
	}
	check := func(when string) {
		t.Helper()
		if len(ix.vecDocs) < ix.live {
			t.Fatalf("%s: %d vector rows for %d live chunks", when, len(ix.vecDocs), ix.live)
		}
		for id, v := range want {
			d := &ix.docs[ix.byID[id]]
			row := int(d.vec)
			if row < 0 || ix.vecDocs[row] != ix.byID[id] || !slices.Equal(ix.vecs[row*ix.dim:(row+1)*ix.dim], v) {
				t.Fatalf("%s: %s's row %d holds another vector", when, id, row)
			}
		}
	}
	check("added")
	if h := nearestTo(want["f17"]); h.ID != "f17" || math.Abs(h.Near-float64(Dot8(want["f17"], want["f17"]))/127/127) > 1e-9 {
		t.Fatalf("nearest to f17's own vector: %+v", h)
	}
	u = Update{}
	old, deleted := want["f17"], want["f1500"]
	want["f17"] = randomVec(r, 16)
	u.Replace("f17", "2", []Chunk{withVec(chunk("f17", "f17", "x", "word"), want["f17"])})
	for i := range 2000 { // past the compaction threshold
		id := "f" + strconv.Itoa(1000+i)
		u.Delete(id)
		delete(want, id)
	}
	ix.Apply(&u)
	if ix.dead != 0 {
		t.Fatalf("no compaction: %d dead", ix.dead)
	}
	if len(ix.vecDocs) != ix.live {
		t.Errorf("%d vector rows for %d live chunks after compaction", len(ix.vecDocs), ix.live)
	}
	check("compacted")
	if h := nearestTo(old); h.ID == "f17" && h.Near > 0.999 {
		t.Errorf("f17's old vector was found: %+v", h)
	}
	if h := nearestTo(want["f17"]); h.ID != "f17" {
		t.Errorf("nearest to f17's new vector: %+v", h)
	}
	if h := nearestTo(deleted); h.ID == "f1500" || h.Near > 0.999 {
		t.Errorf("nearest to a deleted chunk's own vector: %+v", h)
	}
}

// TestNearestTiesShareARank: two chunks whose vectors are equal rank
// alike, and the next ranks after both; which of two equal ones makes a
// cut is the smaller id's, whichever the index took first.
func TestNearestTiesShareARank(t *testing.T) {
	for _, order := range [][]string{{"a", "b"}, {"b", "a"}} {
		ix := New()
		var u Update
		for _, id := range order {
			u.Replace(id, "1", []Chunk{withVec(chunk(id, id, "x", "word"), vec(0, 1))})
		}
		u.Replace("c", "1", []Chunk{withVec(chunk("c", "c", "x", "word"), vec(0, 0))})
		ix.Apply(&u)
		q := words("word")
		q.Near, q.NearK = vec(1, 1), 3
		rank := map[string]int{}
		for _, h := range ix.Search(q, nil, 3) {
			rank[h.ID] = h.NearRank
		}
		if rank["a"] != 1 || rank["b"] != 1 || rank["c"] != 3 {
			t.Errorf("added %v: ranks %v, want a 1, b 1, c 3", order, rank)
		}
		q.NearK = 1
		var near []string
		for _, h := range ix.Search(q, nil, 0) {
			near = append(near, h.ID)
		}
		if !slices.Equal(near, []string{"a"}) {
			t.Errorf("added %v: the one nearest %v, want [a]", order, near)
		}
	}
}

func TestDot8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 140 {
		a, b := make([]int8, n), make([]int8, n+3) // b longer: Dot8 reads len(a)
		var want int32
		for i := range n {
			a[i], b[i] = int8(r.IntN(256)-128), int8(r.IntN(256)-128)
			want += int32(a[i]) * int32(b[i])
		}
		if n == 139 { // the extremes, where a 16-bit sum would overflow
			for i := range n {
				a[i], b[i] = -128, -128
			}
			want = 139 * 128 * 128
		}
		if got := Dot8(a, b); got != want {
			t.Errorf("n=%d: %d, want %d", n, got, want)
		}
		if got := dot8Go(a, b[:n]); got != want {
			t.Errorf("n=%d: dot8Go %d, want %d", n, got, want)
		}
	}
}

func BenchmarkDot8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]int8, 100), make([]int8, 100)
	for i := range x {
		x[i], y[i] = int8(r.IntN(255)-127), int8(r.IntN(255)-127)
	}
	b.Run("asm", func(b *testing.B) {
		for b.Loop() {
			sink += Dot8(x, y)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			sink += dot8Go(x, y)
		}
	})
}

var sink int32

func TestAppendSigns(t *testing.T) {
	v := make([]int8, 130)
	v[0], v[63], v[64], v[129], v[5] = -1, -2, -3, -4, 7
	got := appendSigns(nil, v)
	want := []uint64{1 | 1<<63, 1, 1 << 1}
	if !slices.Equal(got, want) {
		t.Errorf("signs %x, want %x", got, want)
	}
}

func BenchmarkNearest(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ix := New()
	var u Update
	const n = 100000
	for i := range n {
		id := strconv.Itoa(i)
		u.Replace(id, "1", []Chunk{withVec(chunk(id, id, "x", "word"), randomVec(r, 100))})
	}
	ix.Apply(&u)
	q := words("word")
	q.Near = randomVec(r, 100)
	for _, k := range []int{0, 50} { // without and with the nearest
		b.Run(fmt.Sprintf("NearK=%d", k), func(b *testing.B) {
			q.NearK = k
			for range b.N {
				ix.Search(q, nil, 200)
			}
		})
	}
}
