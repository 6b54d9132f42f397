package retrieval

import (
	"cmp"
	"math"
	"math/bits"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// A hit's features for the learned reranking. BM25F sums what each field
// matched; it cannot say that a chunk answering every word of a question
// in its doc comment beats one that repeats two of them in a long body, or
// that a question usually means an exported function rather than a type
// that many files name. The reranker scores the scoring index's pool of
// hits by a weighted sum of these features, weights learned on the
// benchmark's tuning questions (bench_test.go, APTIX_BENCH_TRAIN) and kept
// in weights.Rerank.
const (
	fScore            = iota // ln of the BM25F score (the package bonus, the active-file and repo boosts included)
	fLift                    // ln of the usage lift (usageFactors)
	fPath                    // ln of the path factor (pathFactor)
	fSymbol                  // share of the question's words the symbol holds, each word weighed by its idf
	fDoc                     // idem, the doc comment
	fSummary                 // idem, the doc comment's first sentence (summarySpan: after a licence header)
	fPathWords               // idem, the path
	fContent                 // idem, the text
	fAny                     // idem, any field
	fAll                     // 1 when every word is held somewhere
	fSymbolShare             // share of the symbol's terms (its words and the whole identifier) the question holds
	fFunc                    // a function (no receiver)
	fMethod                  // a method
	fType                    // a type declaration
	fExported                // what it declares is exported
	fLines                   // ln of its length in lines
	fSameFile                // ln(1 + other hits of the pool in the same file)
	fFileAny                 // share of the question's words the pool's hits of the same file hold together
	fFileSummary             // idem, in their doc comments' first sentences
	fPairs                   // share of the question's consecutive word pairs its doc comment's first sentence repeats in order
	fDocLen                  // ln(1 + the doc comment's length in terms)
	fLeadSymbol              // the question's first term (after stop words and common words; mostly its verb: split, parse, read) is in the symbol
	fLeadSummary             // idem, in the doc comment's first sentence
	fGenerated               // its file says it is generated ("Code generated ... DO NOT EDIT.")
	fOtherOS                 // its file builds for some operating systems only, Linux not among them, none of which the question names (x_windows.go, x_plan9.go; platform.go)
	fInternal                // its file is in an internal or vendored package (internalPath), which fPath demotes with tests and tools alike
	fNamedOS                 // its file builds for some operating systems only, and the question names them: the share of them it names (namedPlatforms)
	fAnyOfBest               // fAny divided by the pool's best fAny: how close it comes to the hit that holds most of the question
	fSummaryOfBest           // idem, fSummary
	fFileAnyOfBest           // idem, fFileAny
	fPkgRank                 // 1 / the rank of the hit's package (its directory) among those whose docs the question matches best (memQuery's first pass); 0 beyond packagePool or for a package without a doc comment
	fPkgAny                  // share of the question's words the hit's package doc holds, each word weighed by its idf
	fPkgSummary              // idem, in the package doc's first sentence
	fPkgPairs                // share of the question's consecutive word pairs the package doc's first sentence repeats in order
	fSimSummary              // cosine of the question's word vectors (wordvec.go; summed by idf) with the doc comment's first sentence's
	fSimSymbol               // idem, with the symbol's words
	fSimPkg                  // idem, with the first sentence of the hit's package doc, for a package among the first pass's (fPkgRank)
	fSimSummaryOfBest        // fSimSummary divided by the pool's best
	fNear                    // cosine of the chunk's vector (its doc comment's and, at half weight, its text's) with the question's, as the nearest-chunk search reads them (chunkVector)
	fNearRank                // 1 / its rank among the chunks nearest the question (weights.Near); 0 beyond them
	fSoftDoc                 // share of the question's words its symbol and doc comment say in the same or near words: each word's best cosine with one of theirs (softCover)
	fSoftSummary             // idem, its symbol and the doc comment's first sentence
	fSoftDocOfBest           // fSoftDoc divided by the pool's best
	fSoftFile                // fSoftDoc over the pool's hits of the same file together: each word's best over them
	fSoftFileSummary         // idem, fSoftSummary
	fSoftPkg                 // fSoftSummary of the hit's package doc, for a package among the first pass's (fPkgRank)
	fOtherArch               // its file builds for some architectures only, none of which the question names (x_arm64.go; platform.go)
	fNamedArch               // its file builds for some architectures only, and the question names them: the share of them it names
	fUnbuilt                 // no build compiles its file (//go:build ignore: a cgo input, a generator program)
	fNamedUnbuilt            // idem, and the question names such a file (namesUnbuilt)
	numFeatures
)

// featureNames name the features in weights.Rerank's order, for the
// benchmark's training output.
var featureNames = [numFeatures]string{"score", "lift", "path", "symbol", "doc", "summary", "pathWords", "content", "any", "all", "symbolShare", "func", "method", "type", "exported", "lines", "sameFile", "fileAny", "fileSummary", "pairs", "docLen", "leadSymbol", "leadSummary", "generated", "otherOS", "internal", "namedOS", "anyOfBest", "summaryOfBest", "fileAnyOfBest", "pkgRank", "pkgAny", "pkgSummary", "pkgPairs", "simSummary", "simSymbol", "simPkg", "simSummaryOfBest", "near", "nearRank", "softDoc", "softSummary", "softDocOfBest", "softFile", "softFileSummary", "softPkg", "otherArch", "namedArch", "unbuilt", "namedUnbuilt"}

// features is one hit's feature vector; weights.Rerank is one of them too.
type features [numFeatures]float64

// identityRerank ranks as the factored BM25F score alone.
var identityRerank = features{fScore: 1, fLift: 1, fPath: 1}

// learnedRerank are the weights TestTrainRerank learned on the tuning
// questions' pools (ListNet's loss, L2 0.001 towards identityRerank;
// docs/retrieval.md has the run), rounded.
var learnedRerank = features{
	fScore: 0.57, fLift: 0.51, fPath: 4.38,
	fSymbol: -0.65, fDoc: -0.87, fSummary: -0.13, fPathWords: 2.19, fContent: 0.48, fAny: 1.59, fAll: -0.39, fSymbolShare: -0.26,
	fFunc: -0.02, fMethod: -0.59, fType: -0.87, fExported: 0.51, fLines: -0.55,
	fSameFile: 0.16, fFileAny: 0.84, fFileSummary: 1.37, fPairs: 1.67, fDocLen: -0.48,
	fLeadSymbol: 0.1, fLeadSummary: 0.3, fGenerated: -1.08, fOtherOS: -1.8, fInternal: 1.72, fNamedOS: 1.24,
	fAnyOfBest: 3.62, fSummaryOfBest: 0.16, fFileAnyOfBest: 1.01,
	fPkgRank: -0.29, fPkgAny: 0.8, fPkgSummary: 1.64, fPkgPairs: 0.73,
	fSimSummary: 0.08, fSimSymbol: 0.14, fSimPkg: 0.01, fSimSummaryOfBest: 0.02,
	fNear: 1.39, fNearRank: 0.59,
	fSoftDoc: 1.07, fSoftSummary: -0.03, fSoftDocOfBest: 1.45, fSoftFile: 1.17, fSoftFileSummary: 1.25, fSoftPkg: 0.55,
	fOtherArch: -0.54, fNamedArch: 0.97, fUnbuilt: 0.53, fNamedUnbuilt: 1.27,
}

// Shapes of a declaration, in memMeta.shape.
const (
	shapeFunc = 1 << iota
	shapeMethod
	shapeType
	shapeExported
	shapeGenerated // of the file: see fileShape
	shapeInternal  // idem
	shapeUnbuilt   // idem
)

var shapeFeatures = [...]struct {
	shape   uint8
	feature int
}{{shapeFunc, fFunc}, {shapeMethod, fMethod}, {shapeType, fType}, {shapeExported, fExported}, {shapeGenerated, fGenerated}, {shapeInternal, fInternal}, {shapeUnbuilt, fUnbuilt}}

// shapeOf reads a chunk's shape from its symbol ("func Name",
// "func (*T).Name", "type Name").
func shapeOf(symbol string) uint8 {
	var s uint8
	name := ""
	switch {
	case strings.HasPrefix(symbol, "func ("):
		s = shapeMethod
		if i := strings.LastIndexByte(symbol, '.'); i >= 0 {
			name = symbol[i+1:]
		}
	case strings.HasPrefix(symbol, "func "):
		s, name = shapeFunc, symbol[len("func "):]
	case strings.HasPrefix(symbol, "type "):
		s, name = shapeType, symbol[len("type "):]
	default:
		return 0
	}
	if r, _ := utf8.DecodeRuneInString(name); unicode.IsUpper(r) {
		s |= shapeExported
	}
	return s
}

// generated reports whether a file's leading comment block (its first
// lines while they are comments or blank: a licence, a build constraint,
// the header) says the file is generated: Go's "// Code generated ... DO
// NOT EDIT." (go help generate) and looser spellings ("Generated code, do
// not edit", "DO NOT EDIT" then "generated by: x"), in any comment syntax.
// A generator's template that holds the header further down is not one.
// IndexDir already skips what go-enry calls generated ("Code generated
// by" in Go); this catches the rest (generated assembly, "Code generated
// from", other spellings). head is the file's first chunk: it starts at
// the first line and a comment block cannot span a declaration.
func generated(head string) bool {
	var block strings.Builder
	closing := "" // the end of the multi-line comment the line is in
lines:
	for line := range strings.Lines(head) {
		t := strings.TrimSpace(line)
		switch {
		case closing != "":
			if strings.Contains(t, closing) {
				closing = ""
			}
		case t == "":
			continue
		case strings.HasPrefix(t, "/*") && !strings.Contains(t[2:], "*/"):
			closing = "*/"
		case strings.HasPrefix(t, "<!--") && !strings.Contains(t[4:], "-->"):
			closing = "-->"
		case strings.HasPrefix(t, "//"), strings.HasPrefix(t, "#"), strings.HasPrefix(t, "/*"), strings.HasPrefix(t, "<!--"), strings.HasPrefix(t, "--"), strings.HasPrefix(t, ";"):
		default:
			break lines
		}
		block.WriteString(strings.ToLower(t))
		block.WriteByte('\n')
	}
	b := block.String()
	return strings.Contains(b, "generated") && strings.Contains(b, "do not edit")
}

// fileShape is what a file's chunks share: whether it is generated (see
// generated), whether it is in an internal or vendored package, whether
// no build compiles it, and the platforms it builds for (filePlatforms).
func fileShape(p, head string) (shape uint8, plat platforms) {
	if generated(head) {
		shape |= shapeGenerated
	}
	if internalPath(p) {
		shape |= shapeInternal
	}
	plat, never := filePlatforms(p, head)
	if never {
		shape |= shapeUnbuilt
	}
	return shape, plat
}

// idf weighs a term found in df of n chunks: the rarer, the more it says.
func idf(n float64, df int) float64 { return math.Log(1 + n/float64(1+df)) }

// termGroups are a question's words, each with its expansions: a field
// holding any of them answers the word. idfs weigh each word by how rare
// it is in the text (in the symbols for a word the text never has).
func (ix *Index) termGroups(terms []string, exps []expansion) (groups [][]string, idfs []float64) {
	n := float64(max(ix.mem.Len(), 1))
	for _, t := range terms[:min(len(terms), termindex.MaxGroups)] {
		g := []string{t}
		for _, e := range exps {
			if e.from == t {
				g = append(g, e.term)
			}
		}
		df := ix.mem.DocFreq(termindex.Content, t)
		if df == 0 {
			df = ix.mem.DocFreq(termindex.Symbol, t)
		}
		groups = append(groups, g)
		idfs = append(idfs, idf(n, df))
	}
	return groups, idfs
}

// reranking reports whether the search reranks its pool (rerank), as
// every search on the scoring index does but with the plain weights.
func reranking() bool {
	return weights.Rerank != identityRerank || len(weights.Forest) > 0 || tracePool != nil
}

// rerank rescores hits (their Score the BM25F score, lift and path factor
// given apart) as weights.Rerank's weighted sum of their features plus
// what weights.Forest's trees add, and returns the new scores, exp of the
// sum so they stay positive: with the identity weights and no trees, the
// factored score itself. pkgs are the package docs the question matched
// best, best first (the search's first pass); named what the question
// says of the file it wants (askedOf).
func (ix *Index) rerank(hits []termindex.Hit, lift []float64, factor func(path string) float64, groups [][]string, idf []float64, pkgs []termindex.Hit, named asked) []float64 {
	matched := make([]termindex.Match, len(hits))
	ix.mem.Matched(hits, groups, matched)
	byDir := ix.packageEvidence(pkgs, groups)
	sims := ix.similarities(hits, groups, idf, pkgs)
	soft := ix.softCover(hits, groups, idf, matched)
	softPkg := ix.softPackages(pkgs, groups, idf)
	total := sum(idf)
	share := func(mask uint64) float64 {
		if total == 0 {
			return 0
		}
		var s float64
		for m := mask; m != 0; m &= m - 1 {
			s += idf[bits.TrailingZeros64(m)]
		}
		return s / total
	}
	pairShare := func(pairs int) float64 { // of the question's consecutive word pairs
		if len(groups) < 2 {
			return 0
		}
		return float64(pairs) / float64(len(groups)-1)
	}
	type evidence struct {
		hits         int
		any, summary uint64
		soft         int // the file's place in softFile, -1 without a soft cover
	}
	g := len(groups)
	var softFile []float64 // per file, per word: the best of the file's hits' soft covers, doc then summary
	perFile := make(map[string]evidence, len(hits))
	for i, h := range hits {
		file := h.Meta.(*memMeta).file
		e, seen := perFile[file]
		if !seen {
			e.soft = -1
			if soft != nil {
				e.soft = len(softFile)
				softFile = append(softFile, make([]float64, 2*g)...)
			}
		}
		e.hits++
		e.any |= matched[i].Text()
		e.summary |= matched[i].Fields[termindex.Summary]
		if e.soft >= 0 {
			doc, summary := softFile[e.soft:e.soft+g], softFile[e.soft+g:e.soft+2*g]
			for k := range g {
				doc[k] = max(doc[k], soft.docWords[i*g+k])
				summary[k] = max(summary[k], soft.summaryWords[i*g+k])
			}
		}
		perFile[file] = e
	}
	all := uint64(1)<<len(groups) - 1
	fs := make([]features, len(hits))
	var best features // the pool's best of each of ofBest's bases
	for i, h := range hits {
		m := h.Meta.(*memMeta)
		f := &fs[i]
		f[fScore] = math.Log(max(h.Score, 1e-9))
		f[fLift] = math.Log(lift[i])
		f[fPath] = math.Log(factor(m.file))
		mm := matched[i].Fields
		f[fSymbol] = share(mm[termindex.Symbol])
		if m.symbolLen > 0 {
			f[fSymbolShare] = min(float64(bits.OnesCount64(mm[termindex.Symbol]))/float64(m.symbolLen), 1)
		}
		f[fDoc] = share(mm[termindex.Doc])
		f[fSummary] = share(mm[termindex.Summary])
		f[fPathWords] = share(mm[termindex.Path])
		f[fContent] = share(mm[termindex.Content])
		any := matched[i].Text()
		f[fAny] = share(any)
		if any == all {
			f[fAll] = 1
		}
		for _, sf := range shapeFeatures {
			if m.shape&sf.shape != 0 {
				f[sf.feature] = 1
			}
		}
		var other bool
		f[fNamedOS], other = namedShare(m.plat.oses, named.oses)
		if other && m.plat.oses&linuxBit == 0 {
			f[fOtherOS] = 1
		}
		f[fNamedArch], other = namedShare(m.plat.arches, named.arches)
		if other {
			f[fOtherArch] = 1
		}
		if m.shape&shapeUnbuilt != 0 && named.unbuilt {
			f[fNamedUnbuilt] = 1
		}
		f[fLines] = math.Log1p(float64(m.endLine - m.startLine))
		e := perFile[m.file]
		f[fSameFile] = math.Log(float64(e.hits))
		f[fFileAny] = share(e.any)
		f[fFileSummary] = share(e.summary)
		f[fDocLen] = math.Log1p(matched[i].Lens[termindex.Doc])
		f[fLeadSymbol] = float64(mm[termindex.Symbol] & 1)
		f[fLeadSummary] = float64(mm[termindex.Summary] & 1)
		f[fPairs] = pairShare(matched[i].Pairs)
		if p, ok := byDir[path.Dir(m.file)]; ok {
			f[fPkgRank] = 1 / float64(p.rank)
			f[fPkgAny] = share(p.any)
			f[fPkgSummary] = share(p.summary)
			f[fPkgPairs] = pairShare(p.pairs)
		}
		if sims != nil {
			f[fSimSummary], f[fSimSymbol] = sims.summary[i], sims.symbol[i]
			f[fSimPkg] = sims.pkg[path.Dir(m.file)]
		}
		if soft != nil {
			f[fSoftDoc], f[fSoftSummary] = soft.doc[i], soft.summary[i]
			f[fSoftFile], f[fSoftFileSummary] = idfShare(softFile[e.soft:e.soft+g], idf, total), idfShare(softFile[e.soft+g:e.soft+2*g], idf, total) // soft is nil when total is 0
		}
		f[fSoftPkg] = softPkg[path.Dir(m.file)]
		f[fNear] = h.Near
		if h.NearRank > 0 {
			f[fNearRank] = 1 / float64(h.NearRank)
		}
		for _, r := range ofBest {
			best[r.of] = max(best[r.of], f[r.of])
		}
	}
	out := make([]float64, len(hits))
	for i, h := range hits { // the pool's best known, the ratios, then the score
		f := &fs[i]
		for _, r := range ofBest {
			if best[r.of] > 0 {
				f[r.feature] = f[r.of] / best[r.of]
			}
		}
		if tracePool != nil {
			tracePool(h.Meta.(*memMeta).file, *f)
		}
		s := weights.Forest.score(f)
		for k, w := range weights.Rerank {
			s += w * f[k]
		}
		out[i] = math.Exp(s)
	}
	return out
}

// packageEvidence is what each package doc of pkgs (best first) holds of
// the question, by the package's directory: its rank among them, the
// question's words it holds (bits of groups) in any field and in its first
// sentence, and the word pairs that sentence repeats. A package's doc says
// what the package is for in words its declarations need not repeat
// ("Package heap provides heap operations ... a priority queue"); the
// search's package boost (step 5 of docs/retrieval.md) adds a bonus to
// the best three packages' chunks inside the BM25F score, where the
// reranker cannot tell it apart, and says nothing of how much of the
// question the doc holds.
func (ix *Index) packageEvidence(pkgs []termindex.Hit, groups [][]string) map[string]pkgEvidence {
	if len(pkgs) == 0 {
		return nil
	}
	m := make([]termindex.Match, len(pkgs))
	ix.mem.Matched(pkgs, groups, m)
	byDir := make(map[string]pkgEvidence, len(pkgs))
	for i, h := range pkgs {
		d := path.Dir(h.Meta.(*memMeta).file)
		if _, ok := byDir[d]; ok {
			continue // a second doc of the same package ranks below its first
		}
		byDir[d] = pkgEvidence{rank: len(byDir) + 1, any: m[i].Text(), summary: m[i].Fields[termindex.Summary], pairs: m[i].Pairs}
	}
	return byDir
}

type pkgEvidence struct {
	rank         int
	any, summary uint64
	pairs        int
}

// ofBest are the features that divide another by the pool's best value of
// it. A share of the question's words says how much of the question a hit
// holds; the same share read against the pool's best says whether another
// hit holds more. When every hit misses the question's main word (it is
// said in other words), the best may hold half of it, and that half then
// counts as a whole question.
var ofBest = [...]struct{ feature, of int }{{fAnyOfBest, fAny}, {fSummaryOfBest, fSummary}, {fFileAnyOfBest, fFileAny}, {fSimSummaryOfBest, fSimSummary}, {fSoftDocOfBest, fSoftDoc}}

// tracePool, when set, is handed each pool hit's file and features: the
// benchmark's training reads the pools through it.
var tracePool func(file string, f features)

// similarity is what the word vectors say of each hit: the cosine of the
// question's with its first sentence's and its symbol's, and with each
// package doc's first sentence by directory.
type similarity struct {
	summary, symbol []float64
	pkg             map[string]float64
}

// similarities compare the question with the hits by word vectors, each
// side the sum of its words' unit vectors weighed by idf (a mean vector
// says what a text is about: "thread-safe map" lies near "a map safe for
// concurrent use" though they share one word). nil when no weight reads
// them (the plain ranking), there are no trees (they split on them too)
// and no trace asks.
func (ix *Index) similarities(hits []termindex.Hit, groups [][]string, idf []float64, pkgs []termindex.Hit) *similarity {
	w := weights.Rerank
	if w[fSimSummary] == 0 && w[fSimSymbol] == 0 && w[fSimPkg] == 0 && w[fSimSummaryOfBest] == 0 && len(weights.Forest) == 0 && tracePool == nil {
		return nil
	}
	vs := wordVectors()
	q := questionSum(groups, idf)
	cosines := func(hs []termindex.Hit, field int) []float64 {
		var hitOf []int // read first: resolving a term takes the index's lock again
		var ids []uint32
		ix.mem.EachTermID(hs, field, func(i int, id uint32) { hitOf, ids = append(hitOf, i), append(ids, id) })
		tv := ix.vecs.resolve(ix, field, ids)
		out := make([]float64, len(hs)) // a hit without terms: 0
		acc := make([]float32, vs.dim)
		for k := 0; k < len(ids); { // EachTermID hands the hits out in order
			i, start := hitOf[k], k
			for k < len(ids) && hitOf[k] == i {
				k++
			}
			// Summed in the words' order in the vectors, not by term id:
			// the index numbers a chunk's new words in a map's order, which
			// differs from one load to the next, and a float sum in another
			// order differs in its last bits (replicas agree).
			words := tv[start:k]
			slices.SortFunc(words, func(a, b termVec) int { return cmp.Compare(a.row, b.row) })
			clear(acc)
			for _, t := range words {
				vs.addRow(acc, t)
			}
			out[i] = cosine(q, acc)
		}
		return out
	}
	s := &similarity{summary: cosines(hits, termindex.Summary), symbol: cosines(hits, termindex.Symbol), pkg: map[string]float64{}}
	for i, c := range cosines(pkgs, termindex.Summary) {
		d := path.Dir(pkgs[i].Meta.(*memMeta).file)
		if _, ok := s.pkg[d]; !ok {
			s.pkg[d] = c // a second doc of the same package ranks below its first
		}
	}
	return s
}
