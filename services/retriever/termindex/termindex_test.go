package termindex

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

func chunk(id, file, symbol, content string) Chunk {
	c := Chunk{ID: id, Meta: file}
	c.Text[Symbol] = strings.Fields(symbol)
	c.Text[Path] = strings.Split(file, "/")
	c.Text[Content] = strings.Fields(content)
	c.Keyword[File] = []string{file}
	c.Keyword[Workspace] = []string{"ws"}
	return c
}

func ids(hs []Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

func words(ws ...string) Query {
	var q Query
	for _, w := range ws {
		q.Clauses = append(q.Clauses, Clause{{Field: Symbol, Term: w, Boost: 1}, {Field: Content, Term: w, Boost: 1}})
	}
	return q
}

func TestScoreByHand(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{chunk("a1", "a", "x", "foo foo bar"), chunk("a2", "a", "y", "baz")})
	u.Replace("b", "1", []Chunk{chunk("b1", "b", "z", "bar qux qux qux")})
	ix.Apply(&u)
	q := Query{Clauses: []Clause{{{Field: Content, Term: "foo", Boost: 2}}}}
	got := ix.Search(q, nil, 10)
	if len(got) != 1 || got[0].ID != "a1" {
		t.Fatalf("foo: %v", ids(got))
	}
	// One leaf: the query norm is 1/(boost·idf), so the score is
	// idf · tfnorm; avgdl is ceil(vocabulary 4 / 3 chunks) = 2.
	i := math.Log(1 + (3-1+0.5)/(1+0.5))
	x := math.Sqrt(2)
	want := i * x * K1 / (x + K1*(1-B+B*fieldLength(3)/2.0))
	if math.Abs(got[0].Score-want) > 1e-12 {
		t.Errorf("score %v, want %v", got[0].Score, want)
	}
}

func TestCoordinationRewardsMoreWords(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{chunk("both", "a", "", "alpha beta gamma delta")})
	u.Replace("b", "1", []Chunk{chunk("one", "b", "", "alpha omega omega omega")})
	u.Replace("c", "1", []Chunk{chunk("none", "c", "", "omega")})
	ix.Apply(&u)
	got := ids(ix.Search(words("alpha", "beta"), nil, 10))
	if !slices.Equal(got, []string{"both", "one"}) {
		t.Errorf("got %v, want the chunk with both words first", got)
	}
}

func TestReplaceAndDelete(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{chunk("a1", "a", "", "old words here")})
	u.Replace("b", "1", []Chunk{chunk("b1", "b", "", "other words")})
	ix.Apply(&u)
	if ix.DocFreq(Content, "words") != 2 || ix.Len() != 2 {
		t.Fatalf("df %d len %d", ix.DocFreq(Content, "words"), ix.Len())
	}
	u = Update{}
	u.Replace("a", "2", []Chunk{chunk("a2", "a", "", "new text")})
	ix.Apply(&u)
	if h, _ := ix.FileHash("a"); h != "2" {
		t.Errorf("hash %q", h)
	}
	if got := ids(ix.Search(words("old"), nil, 10)); len(got) != 0 {
		t.Errorf("replaced chunk still found: %v", got)
	}
	if got := ids(ix.Search(words("new"), nil, 10)); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("new chunk: %v", got)
	}
	if ix.DocFreq(Content, "words") != 1 || ix.DocFreq(Content, "old") != 0 {
		t.Errorf("df after replace: words %d old %d", ix.DocFreq(Content, "words"), ix.DocFreq(Content, "old"))
	}
	u = Update{}
	u.Delete("b")
	ix.Apply(&u)
	if _, ok := ix.FileHash("b"); ok || ix.Len() != 1 {
		t.Errorf("deleted file still held (len %d)", ix.Len())
	}
	if got := ids(ix.Search(words("other"), nil, 10)); len(got) != 0 {
		t.Errorf("deleted chunk found: %v", got)
	}
	if n := ix.KeywordValues(File)["b"]; n != 0 {
		t.Errorf("deleted file's keyword counted %d", n)
	}
}

// TestCompactionKeepsResults: after many replacements the dead postings
// are dropped and searches answer as before.
func TestCompactionKeepsResults(t *testing.T) {
	ix := New()
	for round := range 5 {
		var u Update
		for f := range 600 {
			key := string(rune('a'+f%26)) + strings.Repeat("x", f/26)
			u.Replace(key, "", []Chunk{chunk(key+"#"+string(rune('0'+round)), key, "", "common word"+string(rune('a'+f%3)))})
		}
		ix.Apply(&u)
	}
	if ix.Len() != 600 || ix.dead > ix.live/4+1024 {
		t.Fatalf("len %d dead %d", ix.Len(), ix.dead)
	}
	if got := ix.Search(words("common"), nil, 1000); len(got) != 600 {
		t.Errorf("found %d, want 600", len(got))
	}
	if df := ix.DocFreq(Content, "worda"); df != 200 {
		t.Errorf("df %d, want 200", df)
	}
}

func TestFiltersShouldAndFirstPass(t *testing.T) {
	ix := New()
	mk := func(id, file, dir, kind, content string) Chunk {
		c := chunk(id, file, "", content)
		c.Keyword[Dir] = []string{dir}
		if kind != "" {
			c.Keyword[Kind] = []string{kind}
		}
		return c
	}
	var u Update
	u.Replace("p/doc", "", []Chunk{mk("pdoc", "p/doc", "p", "pkg", "checksum of tape data")})
	u.Replace("p/sum", "", []Chunk{mk("psum", "p/sum", "p", "", "sum data")})
	u.Replace("q/sum", "", []Chunk{mk("qsum", "q/sum", "q", "", "sum data data")})
	u.Replace("r/x", "", []Chunk{mk("rx", "r/x", "r", "", "unrelated")})
	ix.Apply(&u)
	q := words("checksum", "sum", "data")
	plain := ids(ix.Search(q, nil, 10))
	first := &FirstPass{Filters: []Filter{{Field: Kind, Values: []string{"pkg"}}}, K: 1, Should: func(hs []Hit) []Should {
		if len(hs) != 1 || hs[0].ID != "pdoc" {
			t.Errorf("first pass: %v", ids(hs))
		}
		return []Should{{{Field: Dir, Value: "p", Boost: 5}}}
	}}
	boosted := ids(ix.Search(q, first, 10))
	if slices.Index(boosted, "psum") > slices.Index(boosted, "qsum") {
		t.Errorf("the first pass's package did not lift its chunk: %v (without: %v)", boosted, plain)
	}
	q.Filters = []Filter{{Field: Dir, Values: []string{"q"}}}
	if got := ids(ix.Search(q, nil, 10)); !slices.Equal(got, []string{"qsum"}) {
		t.Errorf("filter dir q: %v", got)
	}
	if got := ix.CoOccur(Content, "sum", "data"); got != 2 {
		t.Errorf("CoOccur(sum, data) = %d", got)
	}
}

func TestShortTerms(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "", []Chunk{chunk("a1", "a", "cfg config cf cfgx cfgxyz", "")})
	u.Replace("b", "", []Chunk{chunk("b1", "b", "cfg dir", "")})
	ix.Apply(&u)
	got := map[string]int{}
	ix.ShortTerms(Symbol, 'c', 3, 5, func(term string, df int) { got[term] = df })
	if len(got) != 2 || got["cfg"] != 2 || got["cfgx"] != 1 {
		t.Errorf("ShortTerms(c, 3..5) = %v, want cfg:2 cfgx:1", got)
	}
	u = Update{}
	u.Delete("a")
	ix.Apply(&u)
	clear(got)
	ix.ShortTerms(Symbol, 'c', 3, 5, func(term string, df int) { got[term] = df })
	if len(got) != 1 || got["cfg"] != 1 {
		t.Errorf("after deleting a: %v, want cfg:1", got)
	}
}

// TestConcurrentSearchAndUpdate: searches share the index while a batch
// replaces files (run with -race).
func TestConcurrentSearchAndUpdate(t *testing.T) {
	ix := New()
	var u Update
	for f := range 50 {
		key := string(rune('a' + f%26))
		u.Replace(key+strings.Repeat("x", f/26), "", []Chunk{chunk(key+"1", key, "", "alpha beta")})
	}
	ix.Apply(&u)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			var u Update
			u.Replace("a", "", []Chunk{chunk("a"+strings.Repeat("y", i%3), "a", "", "alpha gamma")})
			ix.Apply(&u)
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if got := ix.Search(words("alpha"), nil, 5); len(got) == 0 {
					t.Error("alpha not found")
					return
				}
			}
		})
	}
	wg.Wait()
	<-done
}

func TestMatched(t *testing.T) {
	ix := New()
	var u Update
	u.Replace("a", "1", []Chunk{chunk("a1", "a", "Merge", "zeta merge sort alpha"), chunk("a2", "a", "Split", "split words")})
	ix.Apply(&u)
	groups := [][]string{{"merge"}, {"sort", "order"}, {"split"}, {"absent"}}
	hits := []Hit{{ID: "a1"}, {ID: "a2"}, {ID: "gone"}}
	out := make([]Match, len(hits))
	ix.Matched(hits, groups, out)
	if out[0].Fields[Symbol] != 0 || out[0].Fields[Content] != 0b011 {
		t.Errorf("a1: symbol %b content %b, want 0 and 11 (Merge is not lower-cased here)", out[0].Fields[Symbol], out[0].Fields[Content])
	}
	if out[1].Fields[Symbol] != 0 || out[1].Fields[Content] != 0b100 {
		t.Errorf("a2: content %b, want 100", out[1].Fields[Content])
	}
	if out[2] != (Match{}) {
		t.Errorf("a chunk the index does not hold matches %v", out[2])
	}
	d := chunk("a3", "a", "Sort", "")
	d.Text[Doc] = strings.Fields("merge then sort the words by length then split them")
	d.Summary = []string{"merge", "then", "sort", "words", "nothere"}
	u.Replace("b", "1", []Chunk{d})
	ix.Apply(&u)
	ix.Matched([]Hit{{ID: "a3"}}, groups, out)
	if out[0].Fields[Doc] != 0b111 || out[0].Fields[Summary] != 0b011 {
		t.Errorf("a3: doc %b summary %b, want 111 and 11 (split is past the summary)", out[0].Fields[Doc], out[0].Fields[Summary])
	}
	if out[0].Text() != 0b111 { // the doc's groups; the summary is not a text field of its own
		t.Errorf("a3: text %b, want 111", out[0].Text())
	}
	if out[0].Pairs != 1 { // merge, then one word, sort: groups 0 and 1 in order
		t.Errorf("a3: %d pairs, want 1", out[0].Pairs)
	}
	d.Summary = []string{"merge", "sort", "merge", "sort"} // the same pair twice counts once
	u.Replace("b", "3", []Chunk{d})
	ix.Apply(&u)
	ix.Matched([]Hit{{ID: "a3"}}, groups, out)
	if out[0].Pairs != 1 {
		t.Errorf("a3 with a pair repeated: %d pairs, want 1", out[0].Pairs)
	}
	d.Summary = []string{"sort", "merge"} // the wrong order
	u.Replace("b", "2", []Chunk{d})
	ix.Apply(&u)
	ix.Matched([]Hit{{ID: "a3"}}, groups, out)
	if out[0].Pairs != 0 || out[0].Fields[Summary] != 0b011 {
		t.Errorf("a3 reordered: %d pairs, summary %b; want 0 and 11", out[0].Pairs, out[0].Fields[Summary])
	}
	if h, _ := ix.Holds("a1", Content, "zeta"); !h { // the sorted terms still answer Holds
		t.Error("a1 holds zeta")
	}
}

// TestEachTermID: a field's distinct terms per hit, the summary's in order
// (those of the doc field only), nothing for a chunk the index lacks.
func TestEachTermID(t *testing.T) {
	ix := New()
	d := chunk("a1", "a", "merge sort", "zeta")
	d.Text[Doc] = strings.Fields("sort then merge the words")
	d.Summary = []string{"sort", "then", "merge", "nothere"}
	var u Update
	u.Replace("a", "1", []Chunk{d, chunk("a2", "a", "split", "")})
	ix.Apply(&u)
	hits := []Hit{{ID: "a1"}, {ID: "gone"}, {ID: "a2"}}
	got := func(field int) []string {
		var out []string
		var ids [][2]int
		ix.EachTermID(hits, field, func(i int, id uint32) { ids = append(ids, [2]int{i, int(id)}) })
		for _, p := range ids {
			if p[1] >= ix.TermCount(field) {
				t.Errorf("id %d beyond the dictionary's %d", p[1], ix.TermCount(field))
			}
			out = append(out, fmt.Sprint(p[0], ix.Term(field, uint32(p[1]))))
		}
		return out
	}
	if s := got(Symbol); fmt.Sprint(slices.Sorted(slices.Values(s))) != "[0merge 0sort 2split]" {
		t.Errorf("symbols %s, want 0merge, 0sort, 2split in any order", s)
	}
	if s := fmt.Sprint(got(Summary)); s != "[0sort 0then 0merge]" {
		t.Errorf("summary %s, want [0sort 0then 0merge] (in order; nothere is not a doc term)", s)
	}
}
