package retrieval

// Weights is a field boost and score factor configuration, for the
// benchmark's grid over the tuning questions (APTIX_BENCH_GRID).
type Weights = weightSet

// Expansions returns the abbreviations a query's terms are expanded with,
// as "term←from", for the benchmark's verbose output.
func (ix *Index) Expansions(text string) []string {
	terms := queryTerms(text, MaxQueryTerms)
	exps, _ := ix.expand(terms)
	if weights.Related > 0 {
		rel, _ := ix.relatedTerms(terms, exps)
		exps = append(exps, rel...)
	}
	var out []string
	for _, e := range exps {
		arrow := "←"
		if e.weight != 0 {
			arrow = "~" // related, not an abbreviation
		}
		out = append(out, e.term+arrow+e.from)
	}
	return out
}

// SetWeights replaces the weights and returns the previous ones.
func SetWeights(w Weights) Weights {
	old := weights
	weights = w
	return old
}

// ResetCaches drops what is cached per term, as an index batch does.
func (ix *Index) ResetCaches() { ix.abbrevs.reset(); ix.relatedWords.reset() }

// UseScoringIndex makes searches run on the scoring index (termindex) or,
// false, on bleve's query evaluation, for the benchmark's A/B
// (APTIX_BENCH_ENGINES). The scoring index must have loaded the bucket.
func (ix *Index) UseScoringIndex(on bool) { ix.memReady.Store(on) }

// NumFeatures is the reranker's feature count.
const NumFeatures = numFeatures

// FeatureNames names the reranker's features, in weights.Rerank's order.
var FeatureNames = featureNames

// TracePool hands fn each hit of a search's pool (file and features), or
// stops with nil: the benchmark's training reads the pools through it.
func TracePool(fn func(file string, f [NumFeatures]float64)) {
	if fn == nil {
		tracePool = nil
		return
	}
	tracePool = func(file string, f features) { fn(file, f) }
}

// IdentityRerank ranks by the factored BM25F score alone (the ranking
// before the reranker).
var IdentityRerank = identityRerank

// SixthPassRerank are the sixth pass's learned weights (0ea9f68), the
// ranking before the seventh pass's, for the benchmark's grid (on today's
// features: the summary after a licence header, each word pair once).
var SixthPassRerank = features{
	fScore: 1.29, fLift: 2.19, fPath: 4.55,
	fSymbol: -0.60, fDoc: 0.52, fSummary: 0.89, fPathWords: 2.03, fContent: 1.35, fAny: 1.96, fAll: -0.93, fSymbolShare: 0.10,
	fFunc: -0.15, fMethod: -0.79, fType: -1.46, fExported: 0.60, fLines: 0.03,
	fSameFile: -0.07, fFileAny: 1.89, fFileSummary: 1.81, fPairs: 0.91, fDocLen: -0.33,
}
