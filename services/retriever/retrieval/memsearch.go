package retrieval

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	index "github.com/blevesearch/bleve_index_api"

	"github.com/aptix-dev/aptix/pkg/contracts"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// candidate is a hit of either engine before ranking: the chunk with its
// score (the path factor applied, and on the scoring index the uses), and
// its symbol for explain.
type candidate struct {
	chunk  contracts.RagChunk
	symbol string
}

// usageFactors returns each hit's uses and its lift by them,
// 1 + weights.Usage·ln(1 + uses). For a function or type, uses counts the
// chunks that name it qualified by an import of theirs (or use it inside
// its package); for a method, the chunks that call a method of that name,
// divided by the methods so named (package usage). Among chunks that match
// a question about equally, the declaration the code leans on is the one
// a developer most likely means. The counts follow every index update
// (the Uses field of the scoring index), so replicas agree.
func (ix *Index) usageFactors(hits []termindex.Hit) (uses map[string]float64, lift []float64) {
	lift = make([]float64, len(hits))
	for i := range lift {
		lift[i] = 1
	}
	if weights.Usage == 0 {
		return nil, lift
	}
	keys := make([]string, 2*len(hits))
	for i, h := range hits {
		m := h.Meta.(*memMeta)
		keys[2*i], keys[2*i+1] = m.use, m.decl
	}
	counts := make([]int, len(keys))
	ix.mem.Counts(termindex.Uses, keys, counts)
	uses = make(map[string]float64, len(hits))
	for i, h := range hits {
		if keys[2*i] == "" {
			continue
		}
		n := float64(counts[2*i])
		if keys[2*i+1] != "" {
			n /= float64(max(counts[2*i+1], 1))
		}
		uses[h.ID] = n
		lift[i] = 1 + weights.Usage*math.Log1p(n)
	}
	return uses, lift
}

// useMem says whether a search runs on the scoring index: once it holds
// the bucket, and for every scope but activeFiles (a handful of files,
// which bleve's filter answers as fast).
func (ix *Index) useMem(scope string) bool {
	return ix.memReady.Load() && scope != contracts.RagScopeActiveFiles
}

// memQuery is buildQuery's query for the scoring index: the same clauses,
// filters and boosts, scored alike (termindex reproduces bleve's scores),
// and the platforms the question names (platformShould), which bleve's
// query has not. Its should clauses share one scale (termindex's top):
// naming a platform lowers the repo and package boosts of the chunks
// outside the named platform's files. ok is false when nothing can match.
func memQuery(req contracts.AgentExecuteRequest, scope, workspace string, filterWS bool, terms []string, heavy map[string]bool, exps []expansion, mode []string, named platforms) (q termindex.Query, first *termindex.FirstPass, ok bool) {
	for _, cl := range clauses(terms, heavy, exps) {
		var c termindex.Clause
		for _, l := range cl {
			for _, fb := range l.fields {
				c = append(c, termindex.Term{Field: fb.field, Term: l.term, Boost: fb.boost})
			}
		}
		if weights.Nested {
			q.Clauses = append(q.Clauses, c)
			continue
		}
		for _, t := range c {
			q.Clauses = append(q.Clauses, termindex.Clause{t})
		}
	}
	for _, w := range mode {
		q.Clauses = append(q.Clauses, termindex.Clause{{Field: termindex.Content, Term: w, Boost: boostMode}})
	}
	if len(q.Clauses) == 0 {
		return q, nil, false
	}
	q.MeanLength = weights.MeanLength
	q.K1, q.B, q.Coord, q.IDF = weights.K1, weights.B, weights.Coord, weights.IDF
	q.AvgLength = memAvgLength
	var scoped []termindex.Filter // what the package lookup is scoped by too
	if filterWS {
		scoped = append(scoped, termindex.Filter{Field: termindex.Workspace, Values: []string{workspace}})
	}
	if scope == contracts.RagScopeRepo {
		if req.Repo == "" {
			return q, nil, false
		}
		scoped = append(scoped, termindex.Filter{Field: termindex.Repo, Values: []string{req.Repo}})
	}
	q.Filters = slices.Clone(scoped)
	if req.Language != "" {
		q.Filters = append(q.Filters, termindex.Filter{Field: termindex.Lang, Values: []string{strings.ToLower(req.Language)}})
	}
	if len(req.Tags) > 0 {
		q.Filters = append(q.Filters, termindex.Filter{Field: termindex.Tags, Values: req.Tags})
	}
	if len(req.ActiveFiles) > 0 {
		var files termindex.Should
		for _, f := range cleanPaths(req.ActiveFiles) {
			files = append(files, termindex.Keyword{Field: termindex.File, Value: f, Boost: boostActiveFile})
		}
		q.Should = append(q.Should, files)
	}
	if scope != contracts.RagScopeRepo && req.Repo != "" {
		q.Should = append(q.Should, termindex.Should{{Field: termindex.Repo, Value: req.Repo, Boost: boostRepo}})
	}
	if sh := platformShould(named); len(sh) > 0 {
		q.Should = append(q.Should, sh)
	}
	if weights.Package > 0 {
		first = &termindex.FirstPass{
			Filters: append(scoped, termindex.Filter{Field: termindex.Kind, Values: []string{kindPackageDoc}}),
			K:       packagePool,
			Should: func(hits []termindex.Hit) []termindex.Should {
				var dirs []string
				for _, h := range hits[:min(len(hits), maxPackages)] {
					if d := path.Dir(h.Meta.(*memMeta).file); !slices.Contains(dirs, d) {
						dirs = append(dirs, d)
					}
				}
				out := make([]termindex.Should, len(dirs))
				for i, d := range dirs {
					out[i] = termindex.Should{{Field: termindex.Dir, Value: d, Boost: weights.Package / float64(i+1)}}
				}
				return out
			},
		}
	}
	return q, first, true
}

// memAvgLength is nil but in a test that compares the two engines' scores
// (given bleve's average lengths, which follow its segments).
var memAvgLength func(field string) float64

// searchMem runs the query on the scoring index and reads the hits' text
// from bleve's stored fields. The pool, weights.Pool times the hits kept
// and the weights.Near chunks nearest the question in meaning, is
// reranked (rerank: the path factor, how often the code uses each hit's
// declaration and the hit's other features) before the cut and before the
// text is read, so a chunk the reranker lifts can come from below the
// plain score's cut (named: what the question says of the file it wants,
// askedOf). The active files' hits stay first, and the scores
// are divided by the best one.
func (ix *Index) searchMem(q termindex.Query, first *termindex.FirstPass, factor func(path string) float64, terms []string, exps []expansion, named asked, active []string) ([]candidate, error) {
	keep := ix.o.K * candidatesPerHit
	var pkgs []termindex.Hit // the first pass's package docs, best first: the reranker reads them (packageEvidence)
	if first != nil {
		fp, should := *first, first.Should // the caller's stays as it was
		fp.Should = func(hits []termindex.Hit) []termindex.Should {
			pkgs = hits // a slice of its own: Search's first pass returns a new one
			return should(hits)
		}
		first = &fp
	}
	reranked := reranking()
	var groups [][]string
	var idf []float64
	if reranked {
		groups, idf = ix.termGroups(terms, exps)
	}
	if reranked && weights.Near > 0 {
		// A question may name a thing by what it does, in words no field
		// of the chunk that answers holds: no clause scores it. The chunks
		// that lie nearest it in meaning (chunkVector) join the pool.
		q.Near, q.NearK = quantise(questionSum(groups, idf)), weights.Near
	}
	hits := ix.mem.Search(q, first, keep*max(weights.Pool, 1))
	if len(hits) == 0 {
		return nil, nil
	}
	use, lift := ix.usageFactors(hits)
	if !reranked {
		for i := range hits {
			hits[i].Score *= factor(hits[i].Meta.(*memMeta).file) * lift[i]
		}
	} else {
		top := 0.0
		for i, s := range ix.rerank(hits, lift, factor, groups, idf, pkgs, named) {
			hits[i].Score, top = s, max(top, s)
		}
		// The request's active files come first, as the query's boost
		// made them before reranking: the client said they matter.
		best := top
		for i := range hits {
			if slices.Contains(active, hits[i].Meta.(*memMeta).file) {
				hits[i].Score += top
				best = max(best, hits[i].Score)
			}
		}
		for i := range hits { // the best hit 1: a reranked score says only how far below the best a hit is
			hits[i].Score /= best
		}
	}
	slices.SortStableFunc(hits, func(a, b termindex.Hit) int { return cmp.Compare(b.Score, a.Score) })
	hits = hits[:min(len(hits), keep)]
	r, err := ix.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]candidate, 0, len(hits))
	for _, h := range hits {
		m := h.Meta.(*memMeta)
		c := contracts.RagChunk{Id: h.ID, Path: m.file, Repo: m.repo, Language: m.language, StartLine: m.startLine, EndLine: m.endLine, Score: h.Score, Uses: use[h.ID], Near: h.NearRank}
		d, err := r.Document(h.ID)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", h.ID, err)
		}
		if d == nil {
			continue // removed since: the next search will not find it either
		}
		d.VisitFields(func(f index.Field) {
			if f.Name() == "content" {
				c.Content = string(f.Value())
			}
		})
		out = append(out, candidate{chunk: c, symbol: m.symbol})
	}
	return out, nil
}

// reader opens a reader of bleve's local index (stored fields, document
// and term statistics); the caller closes it.
func (ix *Index) reader() (index.IndexReader, error) {
	adv, err := ix.idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("local index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("local index reader: %w", err)
	}
	return r, nil
}
