package termindex

import (
	"fmt"
	"math"
	"math/rand/v2"
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

func withVec(c Chunk, v []int8) Chunk { c.Vector = v; return c }

// TestNearestJoinsHits: the chunk nearest the question in meaning joins
// the best by BM25F even when BM25F cuts it, with its own score, its
// cosine and rank; a chunk that matches no clause never joins however near
// it lies, nor one a filter excludes; every hit carries its cosine.
func TestNearestJoinsHits(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{
		withVec(chunk("strong", "a", "copy", "copy copy copy data"), vec(0, 0)),
		withVec(chunk("weak", "a", "discard", "writer copy"), vec(1, 2)),
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
	if got[1].NearRank != 1 || math.Abs(got[1].Near-90/127.0) > 1e-9 || got[1].Score <= 0 || got[1].Score >= got[0].Score {
		t.Errorf("the joined hit: %+v", got[1])
	}
	if got[0].NearRank != 0 || got[0].Near != 0 {
		t.Errorf("the BM25F hit, orthogonal to the question: %+v", got[0])
	}
	whole := ix.Search(q, nil, 10)
	if len(whole) != 2 || whole[0].NearRank != 0 || whole[1].NearRank != 1 {
		t.Errorf("both by BM25F already: %+v", whole)
	}
	q.Near = []int8{1, 2, 3} // another length: ignored
	if got := ix.Search(q, nil, 1); len(got) != 1 {
		t.Errorf("a vector of another length: %v", ids(got))
	}
}

// TestNearestFollowsUpdates: a replaced or deleted chunk's vector is no
// longer found, before and after compaction renumbers the vectors.
func TestNearestFollowsUpdates(t *testing.T) {
	ix := New()
	var u Update
	for i := range 3000 {
		f := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		u.Replace(f, "1", []Chunk{withVec(chunk(f, f, "x", "word"), vec(0, 0))})
	}
	u.Replace("target", "1", []Chunk{withVec(chunk("t1", "target", "y", "word"), vec(2, 2))})
	ix.Apply(&u)
	q := words("word")
	q.Near, q.NearK = vec(2, 2), 1
	find := func() Hit {
		for _, h := range ix.Search(q, nil, 1) {
			if h.NearRank == 1 {
				return h
			}
		}
		return Hit{}
	}
	if h := find(); h.ID != "t1" {
		t.Fatalf("nearest: %+v", h)
	}
	u = Update{}
	u.Replace("target", "2", []Chunk{withVec(chunk("t2", "target", "y", "word"), vec(3, 3))})
	ix.Apply(&u)
	if h := find(); h.ID == "t1" || h.ID == "t2" {
		t.Fatalf("after the replacement the old vector was found: %+v", h)
	}
	u = Update{}
	for i := range 2000 { // past the compaction threshold
		f := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		u.Delete(f)
	}
	u.Replace("target", "3", []Chunk{withVec(chunk("t3", "target", "y", "word"), vec(2, 2))})
	ix.Apply(&u)
	if ix.dead != 0 {
		t.Fatalf("no compaction: %d dead", ix.dead)
	}
	if len(ix.vecRows) != ix.live {
		t.Errorf("%d vectors for %d live chunks after compaction", len(ix.vecRows), ix.live)
	}
	if h := find(); h.ID != "t3" || math.Abs(h.Near-1) > 1e-9 {
		t.Errorf("after compaction: %+v", h)
	}
}

func TestDot8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 11 {
		a, b := make([]int8, n), make([]int8, n)
		var want int32
		for i := range n {
			a[i], b[i] = int8(r.IntN(255)-127), int8(r.IntN(255)-127)
			want += int32(a[i]) * int32(b[i])
		}
		if got := dot8(a, b); got != want {
			t.Errorf("n=%d: %d, want %d", n, got, want)
		}
	}
}

func BenchmarkNearest(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ix := New()
	var u Update
	const n = 100000
	for i := range n {
		v := make([]int8, 100)
		for k := range v {
			v[k] = int8(r.IntN(255) - 127)
		}
		id := string(rune(i)) + "x"
		u.Replace(id, "1", []Chunk{withVec(chunk(id, id, "x", "word"), v)})
	}
	ix.Apply(&u)
	q := words("word")
	q.Near, q.NearK = make([]int8, 100), 50
	for k := range q.Near {
		q.Near[k] = int8(r.IntN(255) - 127)
	}
	for _, k := range []int{0, 50} { // without and with the nearest
		b.Run(fmt.Sprintf("NearK=%d", k), func(b *testing.B) {
			q.NearK = k
			for range b.N {
				ix.Search(q, nil, 200)
			}
		})
	}
}

// TestNearestTiesShareARank: two chunks whose vectors are equal rank
// alike, whichever was added first, and the next ranks after both.
func TestNearestTiesShareARank(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{withVec(chunk("a", "a", "x", "word"), vec(0, 1))})
	u.Replace("b", "1", []Chunk{withVec(chunk("b", "b", "x", "word"), vec(0, 1))})
	u.Replace("c", "1", []Chunk{withVec(chunk("c", "c", "x", "word"), vec(0, 0))})
	ix.Apply(&u)
	q := words("word")
	q.Near, q.NearK = vec(1, 1), 3
	rank := map[string]int{}
	for _, h := range ix.Search(q, nil, 3) {
		rank[h.ID] = h.NearRank
	}
	if rank["a"] != 1 || rank["b"] != 1 || rank["c"] != 3 {
		t.Errorf("ranks %v, want a 1, b 1, c 3", rank)
	}
}
