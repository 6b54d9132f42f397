package retrieval

import "math"

// forest is a sum of small regression trees over a hit's features, added
// to the weighted sum of weights.Rerank (docs/retrieval.md, step 11). A
// weight says what a feature is worth whatever the others are; a tree can
// say what it is worth given another: a symbol near the question in
// meaning counts for more in the right package than in the wrong one.
// TestTrainRerank learns the trees after the weights, by gradient boosting
// on the same loss over the same pools, and writes forest_learned.go.
type forest []rerankTree

// treeDepth is each tree's depth: three questions of a hit's features,
// eight answers.
const (
	treeDepth  = 3
	treeSplits = 1<<treeDepth - 1
)

// rerankTree is a complete binary tree stored as a heap: split n's
// children are 2n+1 and 2n+2, a hit goes left when its Feature is at most
// the Split, and the splits' children past the last level are Leaf's
// entries, left to right. A split that learned nothing has Split noSplit
// and sends every hit left.
type rerankTree struct {
	Feature [treeSplits]uint8
	Split   [treeSplits]float64
	Leaf    [treeSplits + 1]float64
}

// noSplit is the Split of a node that sends every hit left.
const noSplit = math.MaxFloat64

func (t *rerankTree) score(f *features) float64 {
	n := 0
	for n < treeSplits {
		if f[t.Feature[n]] <= t.Split[n] {
			n = 2*n + 1
		} else {
			n = 2*n + 2
		}
	}
	return t.Leaf[n-treeSplits]
}

// score is what the trees add to a hit's weighted sum.
func (fs forest) score(f *features) float64 {
	var s float64
	for i := range fs {
		s += fs[i].score(f)
	}
	return s
}
