package retrieval

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	index "github.com/blevesearch/bleve_index_api"

	"github.com/aptix-dev/aptix/pkg/contracts"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// candidate is a hit of either engine before ranking: the chunk with its
// raw score, and its symbol for explain.
type candidate struct {
	chunk  contracts.RagChunk
	symbol string
}

// useMem says whether a search runs on the scoring index: once it holds
// the bucket, and for every scope but activeFiles (a handful of files,
// which bleve's filter answers as fast).
func (ix *Index) useMem(scope string) bool {
	return ix.memReady.Load() && scope != contracts.RagScopeActiveFiles
}

// memQuery is buildQuery's query for the scoring index: the same clauses,
// filters and boosts, scored alike (termindex reproduces bleve's scores).
// ok is false when nothing can match.
func memQuery(req contracts.AgentExecuteRequest, scope, workspace string, filterWS bool, terms []string, heavy map[string]bool, exps []expansion, mode []string) (q termindex.Query, first *termindex.FirstPass, ok bool) {
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
		for _, f := range req.ActiveFiles {
			f = strings.TrimPrefix(path.Clean(filepath.ToSlash(f)), "/")
			files = append(files, termindex.Keyword{Field: termindex.File, Value: f, Boost: boostActiveFile})
		}
		q.Should = append(q.Should, files)
	}
	if scope != contracts.RagScopeRepo && req.Repo != "" {
		q.Should = append(q.Should, termindex.Should{{Field: termindex.Repo, Value: req.Repo, Boost: boostRepo}})
	}
	if weights.Package > 0 {
		first = &termindex.FirstPass{
			Filters: append(scoped, termindex.Filter{Field: termindex.Kind, Values: []string{kindPackageDoc}}),
			K:       maxPackages,
			Should: func(hits []termindex.Hit) []termindex.Should {
				var dirs []string
				for _, h := range hits {
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
// from bleve's stored fields.
func (ix *Index) searchMem(q termindex.Query, first *termindex.FirstPass) ([]candidate, error) {
	hits := ix.mem.Search(q, first, ix.o.K*candidatesPerHit)
	if len(hits) == 0 {
		return nil, nil
	}
	r, err := ix.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]candidate, 0, len(hits))
	for _, h := range hits {
		m := h.Meta.(*memMeta)
		c := contracts.RagChunk{Id: h.ID, Path: m.file, Repo: m.repo, Language: m.language, StartLine: m.startLine, EndLine: m.endLine, Score: h.Score}
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
