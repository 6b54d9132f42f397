package retrieval_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"

	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// The reranker's weights are learned on the tuning questions, in two steps
// (docs/retrieval.md, step 11): APTIX_BENCH_TRAIN=DIR make bench-retriever
// writes each tuning question's pool of hits with their features to
// DIR/<corpus>.jsonl (never the fresh held-out questions), then
// APTIX_TRAIN_POOLS=DIR go test -v -run TestTrainRerank learns the weights
// by gradient descent on ListNet's loss (fit; APTIX_TRAIN_ASCEND=1 for
// coordinate ascent on the MRR, which over-fits), an L2 pull of
// APTIX_TRAIN_L2 (0.001 unless set) towards the plain ranking, reports a
// cross-validation over APTIX_TRAIN_FOLDS folds (2 unless set; 0: none)
// and prints the weights as Go, rounded to two decimals; then boosts APTIX_TRAIN_TREES trees (boostRounds
// unless set; 0: none) on top of each fold's weights and of the weights
// learned on all (boost_test.go), reports their cross-validation too and,
// with APTIX_TRAIN_FOREST=path, writes the last as Go source
// (forest_learned.go). APTIX_TRAIN_DROP=a,b leaves features out of the
// weights and the trees; APTIX_TRAIN_SHOW=1 logs each fold's questions'
// ranks with its trees (showRanks).

// pool is one question's pool as dumpPools writes it.
type pool struct {
	Q    string    `json:"q"`
	Want []string  `json:"want"`
	Rows []poolRow `json:"rows"`
}

// poolRow is a hit of a pool: its file and features.
type poolRow struct {
	File string                         `json:"file"`
	F    [retrieval.NumFeatures]float64 `json:"f"`
}

// score is the reranker's sum of r's features weighted by w (before exp).
func (r poolRow) score(w [retrieval.NumFeatures]float64) float64 {
	var s float64
	for k := range w {
		s += w[k] * r.F[k]
	}
	return s
}

func dumpPools(b *testing.B, ix *retrieval.Index, corpus string, qs []question, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, corpus+".jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	enc := json.NewEncoder(w)
	defer retrieval.TracePool(nil)
	if spec := os.Getenv("APTIX_BENCH_TRAIN_WEIGHTS"); spec != "" { // e.g. Pool=8: the pools of other weights
		w := retrieval.SetWeights(retrieval.Weights{})
		defer retrieval.SetWeights(w)
		setFields(b, &w, spec)
		retrieval.SetWeights(w)
	}
	for _, q := range qs {
		if q.set == fresh {
			continue // never trained on
		}
		p := pool{Q: q.q, Want: q.want}
		retrieval.TracePool(func(file string, f [retrieval.NumFeatures]float64) {
			p.Rows = append(p.Rows, poolRow{file, f})
		})
		if _, err := ix.Search(context.Background(), contracts.AgentExecuteRequest{WorkspaceId: corpus, Instruction: q.q}); err != nil {
			b.Fatal(err)
		}
		if err := enc.Encode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// bestRows are each file's best row of q under scores (one per row): the
// search ranks files by their best hit.
func (q *pool) bestRows(scores []float64) map[string]int {
	best := map[string]int{}
	for j, r := range q.Rows {
		if b, ok := best[r.File]; !ok || scores[j] > scores[b] {
			best[r.File] = j
		}
	}
	return best
}

// scores are q's rows scored by w.
func (q *pool) scores(w [retrieval.NumFeatures]float64) []float64 {
	s := make([]float64, len(q.Rows))
	for j, r := range q.Rows {
		s[j] = r.score(w)
	}
	return s
}

// rr is the reciprocal rank of q's first wanted file when its pool is
// scored by w, files ranked by their best hit (one hit a file, as the
// search's spread), 0 past the tenth file.
func (q *pool) rr(w [retrieval.NumFeatures]float64) float64 { return q.rrOf(q.scores(w)) }

// rrOf is rr for rows scored s.
func (q *pool) rrOf(s []float64) float64 {
	if r := q.rankOf(s); r > 0 && r <= 10 {
		return 1 / float64(r)
	}
	return 0
}

// rankOf is the rank of q's first wanted file when its rows are scored s:
// 1 + the other files whose best row scores strictly higher than its best
// wanted one; 0 when none of its files is in the pool.
func (q *pool) rankOf(s []float64) int {
	best := q.bestRows(s)
	target := math.Inf(-1)
	for _, f := range q.Want {
		if j, ok := best[f]; ok && s[j] > target {
			target = s[j]
		}
	}
	if math.IsInf(target, -1) {
		return 0
	}
	rank := 1
	for f, j := range best {
		if s[j] > target && !slices.Contains(q.Want, f) {
			rank++
		}
	}
	return rank
}

// mrr is the MRR under w of the questions of qs that keep keeps, and how
// many those are.
func mrr(qs []pool, w [retrieval.NumFeatures]float64, keep func(i int) bool) (float64, int) {
	return mrrOf(qs, func(q *pool) []float64 { return q.scores(w) }, keep)
}

// mrrOf is mrr with each pool's rows scored by score.
func mrrOf(qs []pool, score func(q *pool) []float64, keep func(i int) bool) (float64, int) {
	var s float64
	n := 0
	for i := range qs {
		if keep(i) {
			s += qs[i].rrOf(score(&qs[i]))
			n++
		}
	}
	return s / float64(max(n, 1)), n
}

// objective is the mean over corpora of the MRR of the questions keep keeps.
func objective(corpora map[string][]pool, w [retrieval.NumFeatures]float64, keep func(i int) bool) float64 {
	var sum float64
	for _, qs := range corpora {
		m, _ := mrr(qs, w, keep)
		sum += m
	}
	return sum / float64(len(corpora))
}

// ascend is coordinate ascent from w: each weight but the BM25F score's
// (the scale) in turn moves by the step that most improves the objective,
// until no step does.
func ascend(corpora map[string][]pool, w [retrieval.NumFeatures]float64, keep func(i int) bool) [retrieval.NumFeatures]float64 {
	steps := []float64{-2, -1, -0.5, -0.25, -0.1, -0.05, 0.05, 0.1, 0.25, 0.5, 1, 2}
	best := objective(corpora, w, keep)
	for round := 0; round < 20; round++ {
		improved := false
		for k := 1; k < len(w); k++ {
			for _, d := range steps {
				v := w
				v[k] += d
				if o := objective(corpora, v, keep); o > best+1e-9 {
					best, w, improved = o, v, true
				}
			}
		}
		if !improved {
			break
		}
	}
	return w
}

// fit minimises the softmax cross-entropy of the wanted files in each pool
// (ListNet's top-one loss: smooth, so it generalises better than ascending
// the MRR itself), each file by its best hit as the search ranks files
// (a file's other hits would otherwise weigh in the softmax: cross-validated
// over 5 folds 0.700 against 0.680 on the standard library, 0.693 alike on
// nats-server),
// each corpus weighing alike, plus an L2 pull towards start, by gradient
// descent with momentum.
func fit(corpora map[string][]pool, start [retrieval.NumFeatures]float64, keep func(i int) bool, l2 float64) [retrieval.NumFeatures]float64 {
	w := start
	var vel [retrieval.NumFeatures]float64
	const lr, mom = 0.05, 0.9
	for range 1500 {
		var grad [retrieval.NumFeatures]float64
		for _, qs := range corpora {
			n := 0
			var g [retrieval.NumFeatures]float64
			for i := range qs {
				if !keep(i) {
					continue
				}
				q := &qs[i]
				s := q.scores(w)
				top := math.Inf(-1)
				for _, v := range s {
					top = max(top, v)
				}
				bestRow := q.bestRows(s) // each file's best hit: the ranking counts no other
				var zAll, zWant float64
				var eAll, eWant [retrieval.NumFeatures]float64
				for j, r := range q.Rows {
					if bestRow[r.File] != j {
						continue
					}
					e := math.Exp(s[j] - top)
					zAll += e
					want := slices.Contains(q.Want, r.File)
					if want {
						zWant += e
					}
					for k := range w {
						eAll[k] += e * r.F[k]
						if want {
							eWant[k] += e * r.F[k]
						}
					}
				}
				if zWant == 0 {
					continue // the wanted file is not in the pool: nothing to learn
				}
				n++
				for k := range w {
					g[k] += eAll[k]/zAll - eWant[k]/zWant
				}
			}
			for k := range w {
				grad[k] += g[k] / float64(max(n, 1)) / float64(len(corpora))
			}
		}
		for k := range w {
			if dropped[k] {
				continue
			}
			grad[k] += l2 * (w[k] - start[k])
			vel[k] = mom*vel[k] - lr*grad[k]
			w[k] += vel[k]
		}
	}
	return w
}

// dropped are features fit does not move from their start, 0 but for the
// score, lift and path factor (APTIX_TRAIN_DROP=a,b: what the others do
// without them).
var dropped [retrieval.NumFeatures]bool

// loadPools reads the pools dumpPools wrote to dir, by corpus.
func loadPools(t *testing.T, dir string) map[string][]pool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	corpora := map[string][]pool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(f)
		var qs []pool
		for dec.More() {
			var raw struct { // F as a slice: an older dump's shorter vector is an error, not zeros
				Q    string   `json:"q"`
				Want []string `json:"want"`
				Rows []struct {
					File string    `json:"file"`
					F    []float64 `json:"f"`
				} `json:"rows"`
			}
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			p := pool{Q: raw.Q, Want: raw.Want}
			for _, r := range raw.Rows {
				if len(r.F) != retrieval.NumFeatures {
					t.Fatalf("%s: a row has %d features, the reranker %d: dump the pools again", name, len(r.F), retrieval.NumFeatures)
				}
				p.Rows = append(p.Rows, poolRow{File: r.File, F: [retrieval.NumFeatures]float64(r.F)})
			}
			qs = append(qs, p)
		}
		f.Close()
		corpora[strings.TrimSuffix(filepath.Base(name), ".jsonl")] = qs
	}
	return corpora
}

func TestTrainRerank(t *testing.T) {
	dir := os.Getenv("APTIX_TRAIN_POOLS")
	if dir == "" {
		t.Skip("APTIX_TRAIN_POOLS names the pools APTIX_BENCH_TRAIN wrote")
	}
	corpora := loadPools(t, dir)
	var start [retrieval.NumFeatures]float64 = retrieval.IdentityRerank
	all := func(int) bool { return true }
	reportScores := func(label string, score func(q *pool) []float64, keep func(int) bool) map[string]float64 {
		byCorpus := map[string]float64{}
		var parts []string
		for name, qs := range corpora {
			m, n := mrrOf(qs, score, keep)
			byCorpus[name] = m
			parts = append(parts, fmt.Sprintf("%s MRR %.3f (%d)", name, m, n))
		}
		slices.Sort(parts)
		t.Logf("%s: %s", label, strings.Join(parts, ", "))
		return byCorpus
	}
	report := func(label string, w [retrieval.NumFeatures]float64, keep func(int) bool) map[string]float64 {
		return reportScores(label, func(q *pool) []float64 { return q.scores(w) }, keep)
	}
	report("identity, all", start, all)
	l2 := 0.001
	if v := os.Getenv("APTIX_TRAIN_L2"); v != "" {
		var err error
		if l2, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatal(err)
		}
	}
	for name := range strings.SplitSeq(os.Getenv("APTIX_TRAIN_DROP"), ",") {
		if k := slices.Index(retrieval.FeatureNames[:], name); k >= 0 {
			dropped[k] = true
		} else if name != "" {
			t.Fatalf("no feature %q", name)
		}
	}
	learn := func(keep func(int) bool) [retrieval.NumFeatures]float64 {
		if os.Getenv("APTIX_TRAIN_ASCEND") != "" {
			return ascend(corpora, start, keep)
		}
		return fit(corpora, start, keep, l2)
	}
	folds := 2
	if v := os.Getenv("APTIX_TRAIN_FOLDS"); v != "" {
		var err error
		if folds, err = strconv.Atoi(v); err != nil || folds == 1 || folds < 0 {
			t.Fatalf("APTIX_TRAIN_FOLDS=%q: want 2 or more (0: learn on all only)", v)
		}
	}
	for name, qs := range corpora {
		if len(qs) < folds {
			t.Fatalf("%d folds: %s has only %d questions, a fold would have none", folds, name, len(qs))
		}
	}
	rounds := boostRounds
	if v := os.Getenv("APTIX_TRAIN_TREES"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 0 {
			t.Fatalf("APTIX_TRAIN_TREES=%q: want a count of trees", v)
		}
	}
	cv := map[string]float64{}      // each corpus's mean over the folds of their held-out part's MRR
	cvTrees := map[string]float64{} // idem, with the trees
	for fold := range folds {
		train := func(i int) bool { return i%folds != fold }
		test := func(i int) bool { return i%folds == fold }
		w := learn(train)
		report(fmt.Sprintf("fold %d identity on its held-out part", fold), start, test)
		for name, m := range report(fmt.Sprintf("fold %d learned on its held-out part", fold), w, test) {
			cv[name] += m / float64(folds)
		}
		if rounds > 0 {
			trees := boost(corpora, w, train, rounds)
			for name, m := range reportScores(fmt.Sprintf("fold %d learned with %d trees on its held-out part", fold, rounds), func(q *pool) []float64 { return q.forestScores(w, trees) }, test) {
				cvTrees[name] += m / float64(folds)
			}
			if os.Getenv("APTIX_TRAIN_SHOW") != "" {
				showRanks(t, corpora, func(q *pool) []float64 { return q.forestScores(w, trees) }, test)
			}
		}
	}
	for _, c := range []struct {
		label string
		mrr   map[string]float64
	}{{"", cv}, {fmt.Sprintf(", with %d trees", rounds), cvTrees}} {
		var parts []string
		for name, m := range c.mrr {
			parts = append(parts, fmt.Sprintf("%s %.3f", name, m))
		}
		slices.Sort(parts)
		if len(parts) > 0 {
			t.Logf("cross-validated MRR (%d folds)%s: %s", folds, c.label, strings.Join(parts, ", "))
		}
	}
	w := learn(all)
	report("learned on all, all", w, all)
	for k := range w { // as learnedRerank keeps them: the trees learn over what ships
		w[k] = math.Round(w[k]*100) / 100
	}
	report("learned on all, rounded, all", w, all)
	if rounds > 0 {
		trees := boost(corpora, w, all, rounds)
		reportScores(fmt.Sprintf("learned on all with %d trees, all", rounds), func(q *pool) []float64 { return q.forestScores(w, trees) }, all)
		if path := os.Getenv("APTIX_TRAIN_FOREST"); path != "" {
			note := fmt.Sprintf("%d rounds over learnedRerank's scores, each leaf\n// shrunk by %g", rounds, boostShrink)
			if err := writeForest(path, trees, note); err != nil {
				t.Fatal(err)
			}
			t.Logf("the forest is in %s", path)
		}
	}
	var b strings.Builder
	for k, v := range w {
		if v != 0 {
			fmt.Fprintf(&b, "f%s: %g, ", strings.ToUpper(retrieval.FeatureNames[k][:1])+retrieval.FeatureNames[k][1:], v)
		}
	}
	t.Logf("Rerank: features{%s}", strings.TrimSuffix(b.String(), ", "))
}

// showRanks logs each kept question's rank under score among its pool's
// files (rankOf: 0 when none of its files is in the pool) and the pool's
// first three files (APTIX_TRAIN_SHOW=1, with trees and folds: a
// diagnosis).
func showRanks(t *testing.T, corpora map[string][]pool, score func(q *pool) []float64, keep func(int) bool) {
	for name, qs := range corpora {
		for i := range qs {
			if !keep(i) {
				continue
			}
			q := &qs[i]
			s := score(q)
			best := q.bestRows(s)
			files := make([]string, 0, len(best))
			for f := range best {
				files = append(files, f)
			}
			slices.SortFunc(files, func(a, b string) int { return cmp.Compare(s[best[b]], s[best[a]]) })
			t.Logf("SHOW %s\t%d\t%s\t%s\t%s", name, q.rankOf(s), q.Q, strings.Join(q.Want, " "), strings.Join(files[:min(3, len(files))], " "))
		}
	}
}
