package retrieval

// Weights is a field boost and score factor configuration, for the
// benchmark's grid over the tuning questions (APTIX_BENCH_GRID).
type Weights = struct {
	Symbol, Doc, Path float64
	Test, Tool        float64
	Nested            bool
	Expand            float64
}

// SetWeights replaces the weights and returns the previous ones.
func SetWeights(w Weights) Weights {
	old := weights
	weights = w
	return old
}
