package retrieval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/go-enry/go-enry/v2"

	"github.com/aptix-dev/aptix/services/retriever/codetext"
	"github.com/aptix-dev/aptix/services/retriever/termindex"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// DefaultWorkspace is searched when a request names none, and is what
// `aptix index` writes to without --workspace.
const DefaultWorkspace = "default"

// MaxQueryTerms caps the distinct terms taken from an instruction (in
// order of appearance): an instruction may be 256 KiB, a query must stay fast.
const MaxQueryTerms = 48

// Boosts of the query's parts, relative to a match in the chunk's text.
const (
	boostMode       = 0.3 // words of the request's mode
	boostActiveFile = 8   // a chunk of one of the request's active files (the doc field raised the text scores it competes with)
	boostRepo       = 1   // a chunk of the request's repo, in workspace scope
)

// weights are the fields' boosts (BM25 per field, summed, as in BM25F) and
// the factors that rank tests and tool sources below library code. They
// were chosen on the tuning questions of the benchmark (bench_test.go).
type weightSet struct {
	Symbol, Doc, Path float64  // relative to a match in the chunk's text
	Test, Tool        float64  // score factors, see pathFactor
	Nested            bool     // one disjunction per query term, see buildQuery
	Expand            float64  // weight of a learned abbreviation (expand.go); 0 turns them off
	Common            float64  // share of chunks above which a term is dropped, see dropCommon
	Heavy             float64  // share of chunks above which a kept term skips the text field, see dropCommon
	PerFile           int      // chunks of one file before others, see spread; 0 for no limit
	Package           float64  // boost of chunks of the packages whose doc matches best, see packages; 0 turns it off, and with it the first pass the reranker's package features read (packageEvidence)
	Internal          float64  // score factor of internal and vendored packages, see pathFactor
	ExpandText        bool     // look learned abbreviations up in the text too, not only in symbol, doc and path
	Related           float64  // weight of a word related by co-occurrence (related.go); 0 turns them off
	RelatedLift       float64  // how much likelier a related word must be beside the question's word than anywhere, see related
	Group             bool     // an expansion joins its word's clause, see clauses
	MeanLength        bool     // BM25 length normalisation by the field's mean length, not bleve's figure (termindex.Query)
	Usage             float64  // weight of how often the code uses a chunk's declaration, see usageFactors; 0 turns it off
	Pool              int      // hits scored before the factors, in candidates per hit, see searchMem
	K1, B             float64  // BM25's parameters on the scoring index, 0 for bleve's (termindex.Query)
	Coord             float64  // power of the share of clauses matched, 0 for bleve's 1 (termindex.Query)
	IDF               float64  // power of a term's idf in its weight, 0 for bleve's 2 (termindex.Query)
	AbbrevShape       bool     // an abbreviation must be shaped like one, see shapedLike
	Rerank            features // the reranker's weights, see rerank; identityRerank ranks by the factored score
	Forest            forest   // the reranker's trees, added to the weighted sum; nil: none
	Near              int      // chunks nearest the question in meaning joined to the reranker's pool, see searchMem; 0: none
	Platform          float64  // boost of chunks of a file built for a platform the question names, see platformShould; 0 turns it off
}

var weights = weightSet{Symbol: 1, Doc: 1, Path: 1, Test: 0.3, Tool: 0.6, Nested: true, Expand: 0.5, Common: 0.3, Heavy: 0.03, PerFile: 1, Package: 0.5, Internal: 0.5, ExpandText: false, Related: 0, RelatedLift: 8, Group: true, MeanLength: true, Usage: 0.8, Pool: 4, Coord: 1.5, AbbrevShape: true, Rerank: learnedRerank, Forest: learnedForest, Near: 50, Platform: 1}

// Search finds the chunks for a request: a BM25 query built from the
// instruction (and, lightly, the mode), scoped and filtered as the request
// says, active files boosted, overlapping spans of a file merged, cut to K
// chunks and MaxChars, ties broken by path and line so results are stable.
//
// Scopes: none returns nothing; activeFiles returns only chunks of the
// active files (all of them rank, the text only orders them); repo only the
// request's Repo; workspace (the default) every repo of the workspace, the
// request's Repo boosted. Language keeps chunks of that language (any case);
// Tags keeps chunks carrying at least one of the tags.
func (ix *Index) Search(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
	start := time.Now()
	scope := req.RagScope
	if scope == "" {
		scope = contracts.RagScopeWorkspace
	}
	workspace := req.WorkspaceId
	if req.AgentContext != nil && req.AgentContext.Index != "" {
		workspace = req.AgentContext.Index
	}
	if workspace == "" {
		workspace = DefaultWorkspace
	}
	res := contracts.Retrieval{Index: workspace, Scope: scope, Chunks: []contracts.RagChunk{}}
	if scope == contracts.RagScopeNone {
		return res, nil
	}
	if !ix.ready.Load() {
		return res, ErrNotReady
	}
	ix.catchUp(ctx)
	terms := queryTerms(req.Instruction, MaxQueryTerms)
	terms, heavy, err := ix.dropCommon(ctx, terms)
	if err != nil {
		return res, err
	}
	res.Query = strings.Join(terms, " ")
	var exps []expansion
	if weights.Expand > 0 {
		if exps, err = ix.expand(terms); err != nil {
			return res, err
		}
	}
	if weights.Related > 0 {
		rel, err := ix.relatedTerms(terms, exps)
		if err != nil {
			return res, err
		}
		exps = append(exps, rel...)
	}
	mode := queryTerms(req.Mode, 4)
	sole, err := ix.soleWorkspace()
	if err != nil {
		return res, err
	}
	filterWS := sole != workspace
	wantTests := slices.ContainsFunc(terms, func(t string) bool { return t == "test" || t == "exampl" })
	wantTools := slices.ContainsFunc(terms, func(t string) bool { return toolWords[t] })
	factor := func(path string) float64 { return pathFactor(path, wantTests, wantTools) }
	var cands []candidate
	var memLines map[string][2]int // a scoring-index hit's own lines, see explain
	if ix.useMem(scope) {
		named := askedOf(req.Instruction)
		q, first, ok := memQuery(req, scope, workspace, filterWS, terms, heavy, exps, mode, named.platforms)
		if !ok {
			return res, nil
		}
		if cands, err = ix.searchMem(q, first, factor, terms, exps, named, cleanPaths(req.ActiveFiles)); err != nil {
			return res, fmt.Errorf("search %s: %w", workspace, err)
		}
		memLines = make(map[string][2]int, len(cands))
		for _, h := range cands {
			memLines[h.chunk.Id] = [2]int{h.chunk.StartLine, h.chunk.EndLine}
		}
	} else {
		var ok bool
		if cands, ok, err = ix.searchBleve(ctx, req, scope, workspace, filterWS, terms, heavy, exps, mode, factor); err != nil {
			return res, fmt.Errorf("search %s: %w", workspace, err)
		} else if !ok {
			return res, nil
		}
	}
	hits := make([]contracts.RagChunk, 0, len(cands))
	symbols := make(map[string]string, len(cands))
	for _, h := range cands {
		c := h.chunk
		symbols[c.Id] = h.symbol
		hits = append(hits, c)
	}
	res.Chunks = budget(spread(merge(rank(hits)), weights.PerFile), ix.o.K, ix.o.MaxChars)
	for i := range res.Chunks {
		c := &res.Chunks[i]
		var holds func(field int, term string) bool
		if lines, ok := memLines[c.Id]; ok && lines == [2]int{c.StartLine, c.EndLine} && ix.mem.Has(c.Id) {
			// Not merged with another piece: its fields are the chunk's
			// own, whose terms the scoring index holds.
			holds = func(field int, term string) bool { h, _ := ix.mem.Holds(c.Id, field, term); return h }
		}
		c.Matches = explain(*c, symbols[c.Id], terms, heavy, exps, holds)
	}
	if memLines != nil && reranking() { // the near words the reranker read, for the chunks returned only
		groups, _ := ix.termGroups(terms, exps)
		hs := make([]termindex.Hit, len(res.Chunks))
		for i, c := range res.Chunks {
			hs[i].ID = c.Id // a merged piece: the better hit's, whose fields it is explained by
		}
		for i, a := range ix.akin(hs, groups) {
			res.Chunks[i].Akin = a
		}
	}
	res.TookMs = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

// searchBleve runs the query on bleve: before the scoring index has loaded
// the bucket, and for the activeFiles scope. ok is false when nothing can
// match.
func (ix *Index) searchBleve(ctx context.Context, req contracts.AgentExecuteRequest, scope, workspace string, filterWS bool, terms []string, heavy map[string]bool, exps []expansion, mode []string, factor func(path string) float64) ([]candidate, bool, error) {
	q, words, ok := buildQuery(req, scope, workspace, filterWS, terms, heavy, exps, mode, nil)
	if !ok {
		return nil, false, nil
	}
	if weights.Package > 0 && scope != contracts.RagScopeActiveFiles {
		dirs, err := ix.packages(ctx, req, scope, workspace, filterWS, words)
		if err != nil {
			return nil, false, err
		}
		q, _, _ = buildQuery(req, scope, workspace, filterWS, terms, heavy, exps, mode, dirs)
	}
	sr := bleve.NewSearchRequestOptions(q, ix.o.K*candidatesPerHit, 0, false)
	sr.Fields = []string{"content", "file", "repo", "language", "startLine", "endLine", "symbol"}
	out, err := ix.idx.SearchInContext(ctx, sr)
	if err != nil {
		return nil, false, err
	}
	cands := make([]candidate, 0, len(out.Hits))
	for _, h := range out.Hits {
		file := str(h.Fields["file"])
		cands = append(cands, candidate{chunk: contracts.RagChunk{
			Id: h.ID, Path: file, Repo: str(h.Fields["repo"]), Language: str(h.Fields["language"]),
			StartLine: num(h.Fields["startLine"]), EndLine: num(h.Fields["endLine"]), Content: str(h.Fields["content"]), Score: h.Score * factor(file),
		}, symbol: str(h.Fields["symbol"])})
	}
	return cands, true, nil
}

// packages runs the question's words over the package doc comments of the
// workspace (or repo) only and returns the directories of the best
// maxPackages. A package's doc says what the package is for in the words a
// question uses ("Package crc32 implements the 32-bit cyclic redundancy
// check"), words its declarations may never repeat; the main query then
// favours chunks of those packages. The kind term is a conjunct, not a
// filter: the few package docs then drive the search, which skips the rest
// of the words' postings, where a filter would score them all and cost as
// much as the main search.
func (ix *Index) packages(ctx context.Context, req contracts.AgentExecuteRequest, scope, workspace string, filterWS bool, words query.Query) ([]string, error) {
	conj := []query.Query{fieldTerm("kind", kindPackageDoc), words}
	if filterWS {
		conj = append(conj, fieldTerm("workspace", workspace))
	}
	if scope == contracts.RagScopeRepo {
		conj = append(conj, fieldTerm("repo", req.Repo))
	}
	sr := bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(conj...), maxPackages, 0, false)
	sr.Fields = []string{"file"}
	out, err := ix.idx.SearchInContext(ctx, sr)
	if err != nil {
		return nil, fmt.Errorf("package docs: %w", err)
	}
	var dirs []string
	for _, h := range out.Hits {
		if d := path.Dir(str(h.Fields["file"])); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

func fieldTerm(field, v string) query.Query {
	t := bleve.NewTermQuery(v)
	t.SetField(field)
	return t
}

// maxPackages is how many packages' chunks packages lets the query favour.
const maxPackages = 3

// packagePool is how many package docs the first pass ranks: the best
// maxPackages are favoured, and the reranker reads what all of them hold of
// the question (packageEvidence).
const packagePool = 20

// toolWords are the query terms (analyzed) that ask for tool sources.
var toolWords = map[string]bool{"cmd": true, "tool": true, "compil": true, "linker": true, "assembl": true}

// pathFactor scales the score of a chunk by where its file sits. Tests and
// examples (by go-enry's conventions, and anything under testdata/) repeat
// the words of the code they exercise; the sources of commands and tools
// (a cmd/ directory: the compiler and go command in the standard library)
// reimplement much of the library in their own words; an internal or
// vendored package (a directory named internal or vendor on the path) is
// one no user of the code can import, often a second implementation of a
// public one (crypto/internal/fips140 under crypto). A developer asking how
// something works wants the library first, so all three rank lower; tests
// and tools not when the question speaks of them.
func pathFactor(p string, wantTests, wantTools bool) float64 {
	f := 1.0
	if !wantTests && isTest(p) {
		f *= weights.Test
	}
	if !wantTools && (strings.HasPrefix(p, "cmd/") || strings.Contains(p, "/cmd/")) {
		f *= weights.Tool
	}
	if internalPath(p) {
		f *= weights.Internal
	}
	return f
}

// internalPath reports whether the file at p is in an internal or vendored
// package: a directory named internal or vendor on its path.
func internalPath(p string) bool {
	d := "/" + p[:strings.LastIndexByte(p, '/')+1]
	return strings.Contains(d, "/internal/") || strings.Contains(d, "/vendor/")
}

// isTest reports whether p is a test or example (go-enry's rules, and
// anything under testdata/). go-enry matches a list of regular expressions,
// a noticeable share of a search's time over its candidates, so the answer
// is kept per path (bounded by the files indexed).
func isTest(p string) bool {
	if v, ok := testPaths.Load(p); ok {
		return v.(bool)
	}
	t := enry.IsTest(p) || strings.Contains("/"+p, "/testdata/")
	testPaths.Store(p, t)
	return t
}

var testPaths sync.Map // path → isTest

// explain says which of the query's terms each field of a returned chunk
// holds (and its doc comment's first sentence, "summary", which the
// reranker weighs), as the query looked them up (heavy terms and, unless
// weights.ExpandText, expansions are not looked up in the text). It
// analyzes the K chunks returned or, given holds, asks the scoring index,
// which has their fields' terms (analysing 10 chunks' text was a fifth of
// a search).
func explain(c contracts.RagChunk, symbol string, terms []string, heavy map[string]bool, exps []expansion, holds func(field int, term string) bool) []contracts.RagMatch {
	want := make(map[string]bool, len(terms)+len(exps))
	for _, t := range terms {
		want[t] = true
	}
	expanded := make(map[string]bool, len(exps))
	for _, e := range exps {
		want[e.term], expanded[e.term] = true, true
	}
	var out []contracts.RagMatch
	doc := leadingComment(c.Language, c.Content)
	for _, f := range []struct{ name, text string }{
		{"symbol", symbol}, {"doc", doc}, {"summary", summary(doc)}, {"path", c.Path}, {"content", c.Content},
	} {
		if f.text == "" {
			continue
		}
		var found, added []string
		distinct := func() []string { return queryTerms(f.text, math.MaxInt) }
		if field := slices.Index(textFields[:], f.name); holds != nil && field >= 0 { // the summary is short: analysed again
			distinct = func() []string {
				var in []string
				for t := range want {
					if holds(field, t) {
						in = append(in, t)
					}
				}
				return in
			}
		}
		for _, t := range distinct() { // distinct terms
			if f.name == "content" && (heavy[t] || expanded[t] && !weights.ExpandText) {
				continue
			}
			if want[t] {
				found = append(found, t)
				if expanded[t] {
					added = append(added, t)
				}
			}
		}
		if len(found) > 0 {
			slices.Sort(found)
			slices.Sort(added)
			out = append(out, contracts.RagMatch{Field: f.name, Terms: found, Expanded: added})
		}
	}
	return out
}

// candidatesPerHit: a search fetches K times this many hits, so that
// merging, test demotion and the size budget still leave K good ones.
const candidatesPerHit = 5

// Terms found in more than weights.Common of the chunks weigh almost nothing
// in BM25 but cost the most to score (their postings are the longest):
// dropCommon leaves them out unless fewer than minTerms terms would remain.
const minTerms = 2

// dropCommon removes the instruction's most common terms, as above. The
// order of the remaining terms is kept. heavy are those kept that are in
// more than weights.Heavy of the chunks: buildQuery looks them up in the
// short fields only (symbol, doc, path), where they still tell chunks apart,
// and not in the text, where their postings are the longest to score.
func (ix *Index) dropCommon(ctx context.Context, terms []string) (kept []string, heavy map[string]bool, err error) {
	if len(terms) <= minTerms {
		return terms, nil, nil
	}
	n, df, err := ix.contentDF(ctx, terms)
	if err != nil {
		return nil, nil, err
	}
	byDF := slices.Clone(terms)
	slices.SortStableFunc(byDF, func(a, b string) int { return cmp.Compare(df[a], df[b]) })
	keep := map[string]bool{}
	heavy = map[string]bool{}
	for i, t := range byDF {
		if i < minTerms || float64(df[t]) <= weights.Common*float64(n) {
			keep[t] = true
			if float64(df[t]) > weights.Heavy*float64(n) {
				heavy[t] = true
			}
		}
	}
	return slices.DeleteFunc(terms, func(t string) bool { return !keep[t] }), heavy, nil
}

// contentDF is the number of chunks and how many hold each term in their
// text, from the scoring index once it is loaded, else from bleve.
func (ix *Index) contentDF(ctx context.Context, terms []string) (uint64, map[string]uint64, error) {
	df := make(map[string]uint64, len(terms))
	if ix.memReady.Load() {
		for _, t := range terms {
			df[t] = uint64(ix.mem.DocFreq(termindex.Content, t))
		}
		return uint64(ix.mem.Len()), df, nil
	}
	r, err := ix.reader()
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	n, err := r.DocCount()
	if err != nil {
		return 0, nil, fmt.Errorf("local index: %w", err)
	}
	for _, t := range terms {
		tfr, err := r.TermFieldReader(ctx, []byte(t), "content", false, false, false)
		if err != nil {
			return 0, nil, fmt.Errorf("local index term %q: %w", t, err)
		}
		df[t] = tfr.Count()
		tfr.Close()
	}
	return n, df, nil
}

// queryTerms analyzes text as the index does and returns its distinct
// terms in order of appearance, at most max.
func queryTerms(text string, max int) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range analyzer().Analyze([]byte(text)) {
		term := string(t.Term)
		if seen[term] {
			continue
		}
		seen[term] = true
		out = append(out, term)
		if len(out) == max {
			break
		}
	}
	return out
}

var analyzer = sync.OnceValue(func() analysis.Analyzer {
	a, err := registry.NewCache().AnalyzerNamed(codetext.AnalyzerName)
	if err != nil {
		panic(err) // registered by codetext's init: cannot fail
	}
	return a
})

// buildQuery: the terms must match (content, symbol, doc, path) and are what
// scores; filters (workspace, repo, language, tags, active files in that
// scope) must hold and do not score; active files, the request's repo and
// pkgDirs (see packages) otherwise add a boost. filterWS false leaves out
// the workspace filter (the index holds no other). words is the terms' part
// alone. ok is false when nothing can match.
func buildQuery(req contracts.AgentExecuteRequest, scope, workspace string, filterWS bool, terms []string, heavy map[string]bool, exps []expansion, mode []string, pkgDirs []string) (q, words query.Query, ok bool) {
	term := func(field, v string, boost float64) query.Query {
		t := bleve.NewTermQuery(v)
		t.SetField(field)
		t.SetBoost(boost)
		return t
	}
	ws := bleve.NewDisjunctionQuery()
	for _, c := range clauses(terms, heavy, exps) {
		var fields []query.Query
		for _, l := range c {
			for _, fb := range l.fields {
				fields = append(fields, term(textFields[fb.field], l.term, fb.boost))
			}
		}
		if weights.Nested {
			// One clause per term: bleve scales a disjunction's sum by the
			// share of its clauses that matched, so a chunk is rewarded for
			// matching more of the question's words rather than one word in
			// more of its fields.
			ws.AddQuery(bleve.NewDisjunctionQuery(fields...))
		} else {
			ws.AddQuery(fields...)
		}
	}
	for _, w := range mode {
		ws.AddQuery(term("content", w, boostMode))
	}
	var filters []query.Query
	if filterWS {
		filters = append(filters, term("workspace", workspace, 1))
	}
	var must, should []query.Query
	switch scope {
	case contracts.RagScopeActiveFiles:
		files := activeFiles(req.ActiveFiles, term)
		if files == nil {
			return nil, nil, false
		}
		filters = append(filters, files)
		must = append(must, bleve.NewMatchAllQuery())
		if len(ws.Disjuncts) > 0 {
			should = append(should, ws)
		}
	case contracts.RagScopeRepo:
		if req.Repo == "" {
			return nil, nil, false
		}
		filters = append(filters, term("repo", req.Repo, 1))
		fallthrough
	default:
		if len(ws.Disjuncts) == 0 {
			return nil, nil, false
		}
		must = append(must, ws)
		if files := activeFiles(req.ActiveFiles, term); files != nil {
			should = append(should, files)
		}
		if scope != contracts.RagScopeRepo && req.Repo != "" {
			should = append(should, term("repo", req.Repo, boostRepo))
		}
		for i, d := range pkgDirs {
			should = append(should, term("dir", d, weights.Package/float64(i+1)))
		}
	}
	if req.Language != "" {
		filters = append(filters, term("lang", strings.ToLower(req.Language), 1))
	}
	if len(req.Tags) > 0 {
		tags := bleve.NewDisjunctionQuery()
		for _, tag := range req.Tags {
			tags.AddQuery(term("tags", tag, 1))
		}
		filters = append(filters, tags)
	}
	b := query.NewBooleanQuery(must, should, nil)
	if len(filters) > 0 {
		b.AddFilter(bleve.NewConjunctionQuery(filters...))
	}
	return b, ws, true
}

// lookup is one term of the query: the fields it is looked up in, each
// with its boost, and, for a learned abbreviation, the question's word it
// stands for (from). Both engines build their query from these, and another
// source of weighted expansions can add its own.
type lookup struct {
	term, from string
	fields     []fieldBoost
}

type fieldBoost struct {
	field int // termindex.Symbol…Content
	boost float64
}

// textFields are the text fields' names, by termindex number.
var textFields = termindex.TextFieldNames

// lookups: every term in symbol, doc and path with their weights, and in
// the text unless it is heavy (see dropCommon) or an expansion (unless
// weights.ExpandText); an expansion at its weight (weights.Expand for an
// abbreviation) of a typed word's.
func lookups(terms []string, heavy map[string]bool, exps []expansion) []lookup {
	all := make([]expansion, 0, len(terms)+len(exps))
	for _, t := range terms {
		all = append(all, expansion{term: t})
	}
	out := make([]lookup, 0, len(all)+len(exps))
	for _, w := range append(all, exps...) {
		f := 1.0
		if w.from != "" {
			f = cmp.Or(w.weight, weights.Expand) // an expansion counts for less than the word typed
		}
		l := lookup{term: w.term, from: w.from}
		for _, fw := range []fieldBoost{{termindex.Symbol, weights.Symbol}, {termindex.Doc, weights.Doc}, {termindex.Path, weights.Path}} {
			if fw.boost > 0 {
				l.fields = append(l.fields, fieldBoost{fw.field, f * fw.boost})
			}
		}
		if !heavy[w.term] && (w.from == "" || weights.ExpandText) {
			l.fields = append(l.fields, fieldBoost{termindex.Content, f})
		}
		if len(l.fields) == 0 { // a grid setting with no field to look it up in
			continue
		}
		out = append(out, l)
	}
	return out
}

// clause is one clause of the query (a disjunction of its lookups' fields):
// a word typed and, with weights.Group, the expansions that stand for it.
type clause []lookup

// clauses groups the lookups into the query's clauses, in order: one per
// lookup, but that with weights.Group an expansion joins the clause of the
// word it stands for. bleve scales a disjunction by the share of its
// clauses that matched: grouped, an abbreviation is another way to match
// its word, not one more word a chunk is scored as missing.
func clauses(terms []string, heavy map[string]bool, exps []expansion) []clause {
	ls := lookups(terms, heavy, exps)
	out := make([]clause, 0, len(ls))
	at := make(map[string]int, len(terms)) // a typed word's clause
	for _, l := range ls {
		if i, ok := at[l.from]; ok && l.from != "" && weights.Group {
			out[i] = append(out[i], l)
			continue
		}
		if l.from == "" {
			at[l.term] = len(out)
		}
		out = append(out, clause{l})
	}
	return out
}

// activeFiles matches chunks of the given files, paths relative to the
// repository root ("./a/b.go" and "a/b.go" are the same file).
func activeFiles(files []string, term func(field, v string, boost float64) query.Query) query.Query {
	if len(files) == 0 {
		return nil
	}
	q := bleve.NewDisjunctionQuery()
	for _, f := range cleanPaths(files) {
		q.AddQuery(term("file", f, boostActiveFile))
	}
	return q
}

// cleanPaths are paths as the index keeps them: relative to the repository
// root, slashed, cleaned.
func cleanPaths(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = strings.TrimPrefix(path.Clean(filepath.ToSlash(f)), "/")
	}
	return out
}

// rank orders by score, then path, start line and repo: equal scores (common
// with BM25 on short queries) never reorder between runs or replicas.
func rank(c []contracts.RagChunk) []contracts.RagChunk {
	sort.SliceStable(c, func(i, j int) bool {
		if c[i].Score != c[j].Score {
			return c[i].Score > c[j].Score
		}
		if c[i].Path != c[j].Path {
			return c[i].Path < c[j].Path
		}
		if c[i].StartLine != c[j].StartLine {
			return c[i].StartLine < c[j].StartLine
		}
		return c[i].Repo < c[j].Repo // the same file in two repos
	})
	return c
}

// merge joins hits of one file whose spans overlap or touch (the pieces of
// a long function split under the line cap) into one chunk at the best
// hit's rank, so the model sees the function once, in one piece.
func merge(c []contracts.RagChunk) []contracts.RagChunk {
	out := make([]contracts.RagChunk, 0, len(c))
	for _, h := range c {
		at := -1 // the entry h was joined into
		for i := 0; i < len(out); i++ {
			o := out[i]
			if o.Path != h.Path || o.Repo != h.Repo || h.StartLine > o.EndLine+1 || h.EndLine < o.StartLine-1 {
				continue
			}
			if at < 0 {
				out[i] = join(o, h)
				at = i
			} else { // h bridged two entries: fold the later one in too
				out[at] = join(out[at], o)
				out = append(out[:i], out[i+1:]...)
				i--
			}
			h = out[at]
		}
		if at < 0 {
			out = append(out, h)
		}
	}
	return out
}

func join(a, b contracts.RagChunk) contracts.RagChunk {
	first, second := a, b
	if b.StartLine < a.StartLine {
		first, second = b, a
	}
	m := a // keeps the better hit's id and score
	m.StartLine = first.StartLine
	switch {
	case second.EndLine <= first.EndLine:
		m.EndLine, m.Content = first.EndLine, first.Content
	case second.StartLine > first.EndLine:
		gap := second.StartLine - first.EndLine - 1
		m.EndLine = second.EndLine
		m.Content = first.Content + "\n" + strings.Repeat("\n", gap) + second.Content
	default: // overlapping: take the second's lines past the first's end
		lines := strings.Split(second.Content, "\n")
		skip := first.EndLine - second.StartLine + 1
		m.EndLine = second.EndLine
		m.Content = first.Content + "\n" + strings.Join(lines[min(skip, len(lines)):], "\n")
	}
	return m
}

// spread moves a file's chunks past its first perFile to the end, in
// order: ten pieces of one file that repeats the question's words would
// otherwise fill the context, and the next file may be the one that
// answers. 0 keeps the order.
func spread(c []contracts.RagChunk, perFile int) []contracts.RagChunk {
	if perFile <= 0 {
		return c
	}
	seen := map[string]int{}
	first := make([]contracts.RagChunk, 0, len(c))
	var rest []contracts.RagChunk
	for _, h := range c {
		key := h.Repo + "\x00" + h.Path
		if seen[key] < perFile {
			seen[key]++
			first = append(first, h)
		} else {
			rest = append(rest, h)
		}
	}
	return append(first, rest...)
}

// budget keeps at most k chunks whose content fits in maxChars together.
func budget(c []contracts.RagChunk, k, maxChars int) []contracts.RagChunk {
	out := []contracts.RagChunk{}
	used := 0
	for _, h := range c {
		if len(out) == k {
			break
		}
		if used+len(h.Content) > maxChars {
			continue
		}
		used += len(h.Content)
		out = append(out, h)
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}
