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
func (ix *Index) ResetCaches() { ix.abbrevs.reset(); ix.relatedWords.reset(); ix.vecs.reset() }

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

// TwentyFirstPassRerank and TwentyFirstPassForest are the twenty-first
// pass's learned weights and trees (0d26845), the ranking before the
// twenty-second pass's, for the benchmark's grid. Its fNamedOS and fOtherOS
// are read with the twenty-second pass's platforms (a share of the file's
// operating systems, build constraints read, Linux named).
var (
	TwentyFirstPassRerank = features{
		fScore: 0.45, fLift: 0.7, fPath: 4.4,
		fSymbol: -0.96, fDoc: -0.83, fSummary: -0.24, fPathWords: 2.29, fContent: 0.52, fAny: 1.44, fAll: -0.28, fSymbolShare: -0.23,
		fFunc: 0.18, fMethod: -0.42, fType: -0.81, fExported: 0.52, fLines: -0.52,
		fSameFile: 0.15, fFileAny: 0.75, fFileSummary: 1.23, fPairs: 1.83, fDocLen: -0.53,
		fLeadSymbol: -0.01, fLeadSummary: 0.43, fGenerated: -1.37, fOtherOS: -2.13, fInternal: 1.25, fNamedOS: 1.26,
		fAnyOfBest: 3.56, fSummaryOfBest: 0.12, fFileAnyOfBest: 0.94,
		fPkgRank: -0.16, fPkgAny: 1.07, fPkgSummary: 1.7, fPkgPairs: 0.77,
		fSimSummary: 0.05, fSimSymbol: 0.6, fSimPkg: 0.02, fSimSummaryOfBest: 0.1,
		fNear: 1.8, fNearRank: 0.69,
		fSoftDoc: 1.48, fSoftSummary: 0.52, fSoftDocOfBest: 2.09, fSoftFile: 1.27, fSoftFileSummary: 1.56, fSoftPkg: 0.56,
	}
	TwentyFirstPassForest = twentyFirstPassForest
)

// TwentiethPassRerank and TwentiethPassForest are the twentieth pass's
// learned weights and trees (2466549), the ranking before the twenty-first
// pass's, for the benchmark's grid. Its fNamedOS and fOtherOS are read
// as the twenty-second pass reads them (TwentyFirstPassRerank).
var (
	TwentiethPassRerank = features{
		fScore: 0.37, fLift: 0.8, fPath: 4.4,
		fSymbol: -1.06, fDoc: -0.78, fSummary: -0.22, fPathWords: 2.31, fContent: 0.44, fAny: 1.28, fAll: -0.34, fSymbolShare: -0.37,
		fFunc: 0.31, fMethod: -0.32, fType: -0.61, fExported: 0.55, fLines: -0.49,
		fSameFile: 0.16, fFileAny: 0.64, fFileSummary: 1.26, fPairs: 1.79, fDocLen: -0.52,
		fLeadSymbol: -0.08, fLeadSummary: 0.47, fGenerated: -1.58, fOtherOS: -1.62, fInternal: 0.63, fNamedOS: 0.7,
		fAnyOfBest: 3.54, fSummaryOfBest: 0.11, fFileAnyOfBest: 0.94,
		fPkgRank: -0.16, fPkgAny: 1.23, fPkgSummary: 1.7, fPkgPairs: 0.75,
		fSimSummary: 0.03, fSimSymbol: 1.09, fSimPkg: 0.03, fSimSummaryOfBest: 0.03,
		fNear: 1.96, fNearRank: 0.77,
		fSoftDoc: 1.67, fSoftSummary: 0.81, fSoftDocOfBest: 2.3, fSoftFile: 1.47, fSoftFileSummary: 1.71, fSoftPkg: 0.59,
	}
	TwentiethPassForest = twentiethPassForest
)

// NineteenthPassRerank and NineteenthPassForest are the nineteenth
// pass's learned weights and trees (903d826), the ranking before the
// twentieth pass's, for the benchmark's grid.
var (
	NineteenthPassRerank = features{
		fScore: 0.38, fLift: 0.85, fPath: 4.49,
		fSymbol: -1.22, fDoc: -0.7, fSummary: -0.3, fPathWords: 2.15, fContent: 0.34, fAny: 0.95, fAll: -0.34, fSymbolShare: -0.34,
		fFunc: 0.26, fMethod: -0.4, fType: -0.74, fExported: 0.63, fLines: -0.42,
		fSameFile: 0.15, fFileAny: 0.62, fFileSummary: 1.25, fPairs: 1.98, fDocLen: -0.5,
		fLeadSymbol: -0.11, fLeadSummary: 0.48, fGenerated: -1.67, fOtherOS: -1.45,
		fAnyOfBest: 3.39, fSummaryOfBest: 0.15, fFileAnyOfBest: 0.92,
		fPkgRank: -0.2, fPkgAny: 1.35, fPkgSummary: 1.76, fPkgPairs: 0.83,
		fSimSummary: 0.09, fSimSymbol: 1.11, fSimPkg: 0.01, fSimSummaryOfBest: -0.01,
		fNear: 2.27, fNearRank: 0.88,
		fSoftDoc: 1.71, fSoftSummary: 0.78, fSoftDocOfBest: 2.3, fSoftFile: 1.59, fSoftFileSummary: 1.67, fSoftPkg: 0.6,
	}
	NineteenthPassForest = nineteenthPassForest
)

// EighteenthPassRerank and EighteenthPassForest are the eighteenth
// pass's learned weights and trees (37dab31), the ranking before the
// nineteenth pass's, for the benchmark's grid.
var (
	EighteenthPassRerank = features{
		fScore: 0.39, fLift: 0.92, fPath: 4.65,
		fSymbol: -1.23, fDoc: -0.59, fSummary: -0.3, fPathWords: 2.14, fContent: 0.44, fAny: 0.94, fAll: -0.4, fSymbolShare: -0.34,
		fFunc: 0.31, fMethod: -0.38, fType: -0.75, fExported: 0.7, fLines: -0.4,
		fSameFile: 0.16, fFileAny: 0.66, fFileSummary: 1.18, fPairs: 1.97, fDocLen: -0.54,
		fLeadSymbol: -0.07, fLeadSummary: 0.41, fGenerated: -1.77, fOtherOS: -1.44,
		fAnyOfBest: 3.29, fSummaryOfBest: 0.12, fFileAnyOfBest: 0.83,
		fPkgRank: -0.21, fPkgAny: 1.44, fPkgSummary: 1.78, fPkgPairs: 0.86,
		fSimSummary: 0.16, fSimSymbol: 1.22, fSimPkg: 0.01, fSimSummaryOfBest: 0.02,
		fNear: 2.33, fNearRank: 0.92,
		fSoftDoc: 1.74, fSoftSummary: 1.1, fSoftDocOfBest: 2.28, fSoftFile: 1.5, fSoftFileSummary: 1.71, fSoftPkg: 0.59,
	}
	EighteenthPassForest = eighteenthPassForest
)

// SeventeenthPassRerank and SeventeenthPassForest are the seventeenth
// pass's learned weights and trees (7fac0f6), the ranking before the
// eighteenth pass's, for the benchmark's grid.
var (
	SeventeenthPassRerank = features{
		fScore: 0.37, fLift: 0.91, fPath: 4.64,
		fSymbol: -1.13, fDoc: -0.53, fSummary: -0.28, fPathWords: 2.09, fContent: 0.59, fAny: 0.93, fAll: -0.44, fSymbolShare: -0.36,
		fFunc: 0.27, fMethod: -0.44, fType: -0.8, fExported: 0.84, fLines: -0.4,
		fSameFile: 0.17, fFileAny: 0.71, fFileSummary: 1.12, fPairs: 1.96, fDocLen: -0.51,
		fLeadSymbol: 0.02, fLeadSummary: 0.36, fGenerated: -1.86, fOtherOS: -1.41,
		fAnyOfBest: 3.2, fSummaryOfBest: 0.13, fFileAnyOfBest: 0.81,
		fPkgRank: -0.22, fPkgAny: 1.48, fPkgSummary: 1.71, fPkgPairs: 0.83,
		fSimSummary: 0.19, fSimSymbol: 1.42, fSimPkg: 0.11, fSimSummaryOfBest: 0.05,
		fNear: 2.24, fNearRank: 0.97,
		fSoftDoc: 1.71, fSoftSummary: 1.06, fSoftDocOfBest: 2.23, fSoftFile: 1.54, fSoftFileSummary: 1.72, fSoftPkg: 0.55,
	}
	SeventeenthPassForest = seventeenthPassForest
)

// SixteenthPassRerank and SixteenthPassForest are the sixteenth pass's
// learned weights and trees (85b6d66), the ranking before the
// seventeenth pass's, for the benchmark's grid.
var (
	SixteenthPassRerank = features{
		fScore: 0.33, fLift: 0.99, fPath: 4.63,
		fSymbol: -1.21, fDoc: -0.46, fSummary: -0.4, fPathWords: 2.06, fContent: 0.48, fAny: 0.71, fAll: -0.53, fSymbolShare: -0.35,
		fFunc: 0.36, fMethod: -0.36, fType: -0.77, fExported: 0.84, fLines: -0.39,
		fSameFile: 0.24, fFileAny: 0.99, fFileSummary: 1.61, fPairs: 1.92, fDocLen: -0.52,
		fLeadSymbol: -0.11, fLeadSummary: 0.47, fGenerated: -1.92, fOtherOS: -1.41,
		fAnyOfBest: 3.1, fSummaryOfBest: 0.17, fFileAnyOfBest: 1.01,
		fPkgRank: -0.24, fPkgAny: 1.59, fPkgSummary: 1.85, fPkgPairs: 0.95,
		fSimSummary: 0.26, fSimSymbol: 1.65, fSimPkg: 0.45, fSimSummaryOfBest: 0.12,
		fNear: 2.56, fNearRank: 0.96,
		fSoftDoc: 2.06, fSoftSummary: 1.49, fSoftDocOfBest: 2.66,
	}
	SixteenthPassForest = sixteenthPassForest
)

// FifteenthPassRerank and FifteenthPassForest are the fifteenth pass's
// learned weights and trees (3fc1398), the ranking before the sixteenth
// pass's, for the benchmark's grid.
var (
	FifteenthPassRerank = features{
		fScore: 0.56, fLift: 0.9, fPath: 4.59,
		fSymbol: -0.99, fDoc: -0.05, fSummary: -0.3, fPathWords: 1.89, fContent: 0.62, fAny: 0.89, fAll: -0.33, fSymbolShare: -0.47,
		fFunc: 0.27, fMethod: -0.44, fType: -0.89, fExported: 0.98, fLines: -0.39,
		fSameFile: 0.29, fFileAny: 0.93, fFileSummary: 1.77, fPairs: 1.89, fDocLen: -0.23,
		fLeadSymbol: -0.08, fLeadSummary: 0.39, fGenerated: -2.17, fOtherOS: -2.1,
		fAnyOfBest: 2.75, fSummaryOfBest: 0.46, fFileAnyOfBest: 1.04,
		fPkgRank: -0.49, fPkgAny: 1.61, fPkgSummary: 1.85, fPkgPairs: 1.01,
		fSimSummary: 0.34, fSimSymbol: 1.54, fSimPkg: 0.46, fSimSummaryOfBest: 0.13,
		fNear: 2.73, fNearRank: 1.15,
	}
	FifteenthPassForest = fifteenthPassForest
)

// FourteenthPassRerank and FourteenthPassForest are the fourteenth pass's
// learned weights and trees (e4cc075), the ranking before the fifteenth
// pass's, for the benchmark's grid. Their nearest-chunk features were
// learned on chunk vectors of the doc comment alone; the grid measures
// them on today's (chunkVector).
var (
	FourteenthPassRerank = features{
		fScore: 0.67, fLift: 1.15, fPath: 4.39,
		fSymbol: -1.27, fDoc: -0.38, fSummary: -0.46, fPathWords: 1.98, fContent: 0.53, fAny: 0.55, fAll: -0.34, fSymbolShare: -0.33,
		fFunc: 0.1, fMethod: -0.69, fType: -0.9, fExported: 0.82, fLines: -0.28,
		fSameFile: 0.29, fFileAny: 1, fFileSummary: 1.59, fPairs: 1.77, fDocLen: -0.16,
		fLeadSymbol: -0.01, fLeadSummary: 0.33, fGenerated: -2.22, fOtherOS: -2.34,
		fAnyOfBest: 2.31, fSummaryOfBest: 0.77, fFileAnyOfBest: 1.28,
		fPkgRank: -0.6, fPkgAny: 1.55, fPkgSummary: 1.79, fPkgPairs: 1.01,
		fSimSummary: 0.11, fSimSymbol: 1.8, fSimPkg: 0.48, fSimSummaryOfBest: 0.01,
		fNear: 0.71, fNearRank: 1.36,
	}
	FourteenthPassForest = fourteenthPassForest
)

// ThirteenthPassRerank and ThirteenthPassForest are the thirteenth pass's
// learned weights and trees (91d0ccc), the ranking before the fourteenth
// pass's, for the benchmark's grid: the weights without the chunks nearest
// in meaning (Near 0).
var (
	ThirteenthPassRerank = features{
		fScore: 0.9, fLift: 1.24, fPath: 4.44,
		fSymbol: -1.31, fDoc: -0.24, fSummary: -0.33, fPathWords: 1.83, fContent: 0.63, fAny: 0.47, fAll: -0.49, fSymbolShare: -0.65,
		fFunc: -0.08, fMethod: -0.73, fType: -1.08, fExported: 0.84, fLines: -0.3,
		fSameFile: 0.27, fFileAny: 0.71, fFileSummary: 1.75, fPairs: 1.61, fDocLen: -0.01,
		fLeadSymbol: -0.04, fLeadSummary: 0.37, fGenerated: -2.38, fOtherOS: -2.37,
		fAnyOfBest: 2.25, fSummaryOfBest: 0.84, fFileAnyOfBest: 1.63,
		fPkgRank: -0.69, fPkgAny: 1.67, fPkgSummary: 1.68, fPkgPairs: 1.01,
		fSimSummary: 0.58, fSimSymbol: 2, fSimPkg: 0.43, fSimSummaryOfBest: 0.51,
	}
	ThirteenthPassForest = thirteenthPassForest
)

// TwelfthPassRerank are the twelfth pass's learned weights (c2cd814),
// the ranking before the thirteenth pass's, for the benchmark's grid. Its
// four similarities were learned on the twelfth pass's vectors (gensim's);
// the grid measures them on today's.
var TwelfthPassRerank = features{
	fScore: 0.97, fLift: 1.33, fPath: 4.56,
	fSymbol: -1.31, fDoc: -0.22, fSummary: -0.35, fPathWords: 1.69, fContent: 0.55, fAny: 0.39, fAll: -0.5, fSymbolShare: -0.57,
	fFunc: -0.03, fMethod: -0.66, fType: -0.97, fExported: 0.85, fLines: -0.27,
	fSameFile: 0.29, fFileAny: 0.73, fFileSummary: 1.89, fPairs: 1.66, fDocLen: 0,
	fLeadSymbol: -0.08, fLeadSummary: 0.42, fGenerated: -2.46, fOtherOS: -2.45,
	fAnyOfBest: 2.32, fSummaryOfBest: 0.76, fFileAnyOfBest: 1.55,
	fPkgRank: -0.7, fPkgAny: 1.81, fPkgSummary: 1.55, fPkgPairs: 1.04,
	fSimSummary: 0.3, fSimSymbol: 2.46, fSimPkg: 0.36, fSimSummaryOfBest: 0.17,
}

// EleventhPassRerank are the eleventh pass's learned weights (b2c5853),
// the ranking before the twelfth pass's, for the benchmark's grid.
var EleventhPassRerank = features{
	fScore: 1.06, fLift: 1.3, fPath: 4.65,
	fSymbol: -0.62, fDoc: -0.6, fSummary: -0.26, fPathWords: 1.83, fContent: 0.36, fAny: 0.38, fAll: -0.56, fSymbolShare: -0.25,
	fFunc: 0.54, fMethod: -0.08, fType: -0.64, fExported: 0.9, fLines: -0.16,
	fSameFile: 0.32, fFileAny: 0.78, fFileSummary: 1.67, fPairs: 1.31, fDocLen: 0.01,
	fLeadSymbol: -0.05, fLeadSummary: 0.36, fGenerated: -2.54, fOtherOS: -2.55,
	fAnyOfBest: 1.93, fSummaryOfBest: 1.14, fFileAnyOfBest: 1.67,
	fPkgRank: -0.74, fPkgAny: 2.22, fPkgSummary: 1.63, fPkgPairs: 1.02,
}

// TenthPassRerank are the tenth pass's learned weights (b11fd7f), the
// ranking before the eleventh pass's, for the benchmark's grid.
var TenthPassRerank = features{
	fScore: 0.91, fLift: 1.36, fPath: 4.55,
	fSymbol: -0.62, fDoc: -0.58, fSummary: -0.03, fPathWords: 1.98, fContent: 0.37, fAny: 0.44, fAll: -0.35, fSymbolShare: -0.05,
	fFunc: 0.59, fMethod: -0.07, fType: -0.63, fExported: 0.9, fLines: -0.19,
	fSameFile: 0.37, fFileAny: 0.81, fFileSummary: 1.73, fPairs: 1.39, fDocLen: 0.08,
	fLeadSymbol: -0.06, fLeadSummary: 0.3, fGenerated: -2.72, fOtherOS: -2.65,
	fAnyOfBest: 1.86, fSummaryOfBest: 1.07, fFileAnyOfBest: 1.67,
}

// NinthPassRerank are the ninth pass's learned weights (798504b), the
// ranking before the tenth pass's, for the benchmark's grid.
var NinthPassRerank = features{
	fScore: 0.99, fLift: 1.33, fPath: 4.63,
	fSymbol: -0.61, fDoc: -0.27, fSummary: 0.92, fPathWords: 2.02, fContent: 1.63, fAny: 1.93, fAll: -0.67, fSymbolShare: -0.01,
	fFunc: 0.57, fMethod: -0.25, fType: -0.71, fExported: 0.83, fLines: -0.14,
	fSameFile: 0.40, fFileAny: 2.23, fFileSummary: 2.14, fPairs: 1.56, fDocLen: 0.01,
	fLeadSymbol: 0.42, fGenerated: -2.91, fOtherOS: -2.81,
}

// EighthPassRerank are the eighth pass's learned weights (6ba64ef), the
// ranking before the ninth pass's, for the benchmark's grid.
var EighthPassRerank = features{
	fScore: 1.24, fLift: 1.59, fPath: 4.55,
	fSymbol: -0.53, fDoc: -0.61, fSummary: 0.99, fPathWords: 1.96, fContent: 1.14, fAny: 1.55, fAll: -0.51, fSymbolShare: 0.05,
	fFunc: 0.46, fMethod: -0.27, fType: -1.05, fExported: 0.68, fLines: -0.10,
	fSameFile: 0.37, fFileAny: 2.09, fFileSummary: 1.99, fPairs: 1.36, fDocLen: 0.07,
	fLeadSymbol: 0.40, fLeadSummary: 0.06, fGenerated: -3.06, fOtherOS: -2.94,
}

// SeventhPassRerank are the seventh pass's learned weights (c921a59), the
// ranking before the eighth pass's, for the benchmark's grid (the eighth
// pass's two new features weigh 0 in it).
var SeventhPassRerank = features{
	fScore: 1.35, fLift: 2.21, fPath: 4.50,
	fSymbol: -0.84, fDoc: 0.26, fSummary: 0.54, fPathWords: 2.09, fContent: 1.56, fAny: 1.66, fAll: -0.79, fSymbolShare: 0.17,
	fFunc: 0.10, fMethod: -0.62, fType: -1.37, fExported: 0.54, fLines: 0.03,
	fSameFile: -0.08, fFileAny: 2.08, fFileSummary: 1.96, fPairs: 1.03, fDocLen: -0.24,
	fLeadSymbol: 0.29, fLeadSummary: 0.28,
}

// RerankTree is one of the reranker's trees, NoSplit a split that sends
// every hit left and TreeSplits a tree's number of splits, for
// TestTrainRerank's boosting.
type RerankTree = rerankTree

const (
	NoSplit    = noSplit
	TreeSplits = treeSplits
	FSymbol    = fSymbol // two features by name, for a synthetic pool
	FDoc       = fDoc
)

// TreeScore is what t adds to a hit with features f.
func TreeScore(t *RerankTree, f *[NumFeatures]float64) float64 { return t.score((*features)(f)) }
