package retrieval_test

import (
	"bytes"
	"fmt"
	"go/format"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// Boosting learns the reranker's trees (retrieval's forest) on top of
// weights learned by fit: each round fits one tree to the gradient of
// fit's loss (the softmax over each file's best hit, against the wanted
// files) at the scores so far, each leaf a Newton step shrunk by
// boostShrink. Each feature is cut into at most boostBins bins at the
// train rows' quantiles, so a split is searched over bins, not values.
const (
	boostRounds = 100 // the shipped forest's trees (APTIX_TRAIN_TREES)
	boostShrink = 0.1
	boostBins   = 32
)

type rowRef struct{ q, j int }

type booster struct {
	pools  []*pool
	weight []float64 // each pool's share of the loss: 1 / its corpus's pools
	scores [][]float64
	rows   []rowRef
	bins   [][retrieval.NumFeatures]uint8
	edges  [retrieval.NumFeatures][]float64
	g, h   []float64
	lambda float64 // the leaves' L2, and the least hessian a side of a split holds
}

// boost learns rounds trees on the pools keep keeps, over the scores of
// weights w.
func boost(corpora map[string][]pool, w [retrieval.NumFeatures]float64, keep func(int) bool, rounds int) []retrieval.RerankTree {
	b := &booster{}
	names := make([]string, 0, len(corpora))
	for name := range corpora {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		qs := corpora[name]
		n := 0
		for i := range qs {
			if keep(i) {
				n++
			}
		}
		for i := range qs {
			if keep(i) {
				b.pools = append(b.pools, &qs[i])
				b.weight = append(b.weight, 1/float64(n))
				b.scores = append(b.scores, qs[i].scores(w))
			}
		}
	}
	b.lambda = 1 / float64(max(len(b.pools), 1))
	for qi, q := range b.pools {
		for j := range q.Rows {
			b.rows = append(b.rows, rowRef{qi, j})
		}
	}
	if len(b.rows) == 0 {
		return nil
	}
	for k := range retrieval.NumFeatures {
		vals := make([]float64, 0, len(b.rows))
		for _, r := range b.rows {
			vals = append(vals, b.pools[r.q].Rows[r.j].F[k])
		}
		sort.Float64s(vals)
		for c := 1; c < boostBins; c++ {
			if v := vals[c*len(vals)/boostBins]; len(b.edges[k]) == 0 || v > b.edges[k][len(b.edges[k])-1] {
				b.edges[k] = append(b.edges[k], v)
			}
		}
	}
	b.bins = make([][retrieval.NumFeatures]uint8, len(b.rows))
	for i, r := range b.rows {
		for k := range retrieval.NumFeatures {
			b.bins[i][k] = uint8(sort.SearchFloat64s(b.edges[k], b.pools[r.q].Rows[r.j].F[k])) // value ≤ edges[bin]
		}
	}
	b.g, b.h = make([]float64, len(b.rows)), make([]float64, len(b.rows))
	all := make([]int, len(b.rows))
	for i := range all {
		all[i] = i
	}
	var trees []retrieval.RerankTree
	for range rounds {
		b.gradients()
		var t retrieval.RerankTree
		b.grow(&t, 0, all)
		trees = append(trees, t)
		for qi, q := range b.pools {
			for j := range q.Rows {
				b.scores[qi][j] += retrieval.TreeScore(&t, &q.Rows[j].F)
			}
		}
	}
	return trees
}

// gradients are the loss's first and second derivatives by each row's
// score: rows that are not their file's best hit, and pools whose wanted
// file is not in them, have none.
func (b *booster) gradients() {
	i := 0
	for qi, q := range b.pools {
		s := b.scores[qi]
		best := q.bestRows(s)
		top := slices.Max(s)
		var z, zWant float64
		for j, r := range q.Rows {
			if best[r.File] == j {
				e := math.Exp(s[j] - top)
				z += e
				if slices.Contains(q.Want, r.File) {
					zWant += e
				}
			}
		}
		for j, r := range q.Rows {
			b.g[i+j], b.h[i+j] = 0, 0
			if zWant == 0 || best[r.File] != j {
				continue
			}
			e := math.Exp(s[j] - top)
			p, target := e/z, 0.0
			if slices.Contains(q.Want, r.File) {
				target = e / zWant
			}
			b.g[i+j] = (p - target) * b.weight[qi]
			b.h[i+j] = max(p*(1-p), 1e-6) * b.weight[qi]
		}
		i += len(q.Rows)
	}
}

// grow fills node n of t (a split, or a leaf past the splits) from the
// rows idx.
func (b *booster) grow(t *retrieval.RerankTree, n int, idx []int) {
	var sg, sh float64
	for _, i := range idx {
		sg += b.g[i]
		sh += b.h[i]
	}
	if n >= retrieval.TreeSplits {
		t.Leaf[n-retrieval.TreeSplits] = -sg / (sh + b.lambda) * boostShrink
		return
	}
	var hg, hh [retrieval.NumFeatures][boostBins]float64
	for _, i := range idx {
		if b.h[i] == 0 {
			continue
		}
		for k, bin := range b.bins[i] {
			hg[k][bin] += b.g[i]
			hh[k][bin] += b.h[i]
		}
	}
	parent := sg * sg / (sh + b.lambda)
	bestGain, bestK, bestBin := 0.0, -1, 0
	for k := range retrieval.NumFeatures {
		if dropped[k] { // APTIX_TRAIN_DROP leaves a feature out of the trees too
			continue
		}
		var gl, hl float64
		for bin := range b.edges[k] {
			gl += hg[k][bin]
			hl += hh[k][bin]
			gr, hr := sg-gl, sh-hl
			if hl < b.lambda || hr < b.lambda {
				continue
			}
			if gain := gl*gl/(hl+b.lambda) + gr*gr/(hr+b.lambda) - parent; gain > bestGain {
				bestGain, bestK, bestBin = gain, k, bin
			}
		}
	}
	if bestK < 0 {
		t.Feature[n], t.Split[n] = 0, retrieval.NoSplit
		b.grow(t, 2*n+1, idx)
		b.grow(t, 2*n+2, nil)
		return
	}
	t.Feature[n], t.Split[n] = uint8(bestK), b.edges[bestK][bestBin]
	var left, right []int
	for _, i := range idx {
		if int(b.bins[i][bestK]) <= bestBin {
			left = append(left, i)
		} else {
			right = append(right, i)
		}
	}
	b.grow(t, 2*n+1, left)
	b.grow(t, 2*n+2, right)
}

// forestScores are q's rows scored by w and the trees.
func (q *pool) forestScores(w [retrieval.NumFeatures]float64, trees []retrieval.RerankTree) []float64 {
	s := q.scores(w)
	for j := range q.Rows {
		for t := range trees {
			s[j] += retrieval.TreeScore(&trees[t], &q.Rows[j].F)
		}
	}
	return s
}

// writeForest writes trees as forest_learned.go's Go source to path.
func writeForest(path string, trees []retrieval.RerankTree, note string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by TestTrainRerank (APTIX_TRAIN_FOREST); DO NOT EDIT.\n\npackage retrieval\n\n")
	fmt.Fprintf(&b, "// learnedForest are the reranker's trees (forest), learned on the tuning\n// questions' pools: %s.\nvar learnedForest = forest{\n", note)
	name := func(k uint8) string {
		n := retrieval.FeatureNames[k]
		return "f" + strings.ToUpper(n[:1]) + n[1:]
	}
	num := func(v float64) string {
		if v == retrieval.NoSplit {
			return "noSplit"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, t := range trees {
		var fs, ss, ls []string
		for n := range t.Feature {
			fs, ss = append(fs, name(t.Feature[n])), append(ss, num(t.Split[n]))
		}
		for _, v := range t.Leaf {
			ls = append(ls, num(v))
		}
		fmt.Fprintf(&b, "{Feature: [treeSplits]uint8{%s},\nSplit: [treeSplits]float64{%s},\nLeaf: [treeSplits + 1]float64{%s}},\n",
			strings.Join(fs, ", "), strings.Join(ss, ", "), strings.Join(ls, ", "))
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("format the forest: %w", err)
	}
	return os.WriteFile(path, src, 0o644)
}

// TestBoostLearnsAnInteraction: the wanted file holds exactly one of two
// features (say its symbol or its doc matches, never both), the others
// both or neither. No weighted sum ranks that; a few trees do.
func TestBoostLearnsAnInteraction(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	side := func(high bool) float64 {
		if high {
			return 0.6 + 0.4*r.Float64()
		}
		return 0.4 * r.Float64()
	}
	var qs []pool
	for q := range 400 {
		p := pool{Q: fmt.Sprint("q", q), Want: []string{"want.go"}}
		for f := range 8 {
			var row poolRow
			row.File = fmt.Sprintf("f%d.go", f)
			a, c := r.IntN(2) == 1, r.IntN(2) == 1
			if f == 0 {
				row.File, c = "want.go", !a
			} else {
				c = a
			}
			row.F[retrieval.FSymbol], row.F[retrieval.FDoc] = side(a), side(c)
			p.Rows = append(p.Rows, row)
		}
		qs = append(qs, p)
	}
	corpora := map[string][]pool{"synthetic": qs}
	train := func(i int) bool { return i%2 == 0 }
	test := func(i int) bool { return i%2 == 1 }
	w := fit(corpora, retrieval.IdentityRerank, train, 0.001)
	trees := boost(corpora, w, train, 30)
	var linear, boosted float64
	n := 0
	for i := range qs {
		if test(i) {
			linear += qs[i].rr(w)
			boosted += qs[i].rrOf(qs[i].forestScores(w, trees))
			n++
		}
	}
	linear, boosted = linear/float64(n), boosted/float64(n)
	if boosted < 0.95 || boosted < linear+0.2 {
		t.Fatalf("held-out MRR: weights alone %.3f, with %d trees %.3f: the trees did not learn the interaction", linear, len(trees), boosted)
	}
	t.Logf("held-out MRR: weights alone %.3f, with trees %.3f", linear, boosted)
}
