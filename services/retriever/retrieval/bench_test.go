package retrieval_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/retriever/cli"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// question is one benchmark question: what a developer would ask, the files
// that answer it and the symbol they would want to see.
type question struct {
	q      string
	want   []string
	symbol string
	set    int // tuning, oldHeldOut, a pass's held-out (thirdHeldOut + i) or fresh
}

// The question sets. The first two passes tuned on two thirds of each
// corpus's questions file and held out every third question; the third and
// the fifth to twenty-seventh passes held out a fresh file per corpus
// (corpus.heldOut; docs/retrieval.md numbers the engine pass fourth). All
// of them have been measured since, so they now join the tuning (reported
// apart, for continuity). corpus.fresh is the latest file per corpus,
// written and committed before the tuning of the pass that measures it,
// measured only with APTIX_BENCH_FRESH=1: the fourteenth pass measured its
// own (-13) and then, its ranking frozen, the next (-14); the fifteenth
// tuned on both and measured -15, written before the fourteenth pass
// measured -14; the sixteenth tuned on -15 too and measured -16, written
// before the fifteenth's tuning, and then, its ranking frozen, the next
// (-17), written before its own tuning; the seventeenth tuned on -16 and
// -17 too and measured -18, written before any of its tuning; the
// eighteenth tuned on -18 too and measured -19, written before any of its
// tuning; the nineteenth tuned on -19 too and measured -20, drawn at random
// and written before any of its tuning, and then, its ranking frozen, -21;
// the twentieth tuned on -20 and -21 too and measured -22, drawn at random
// and written before any of its tuning, and then, its ranking frozen, -23;
// the twenty-first tuned on -22 and -23 too and measured -24 with the
// build before its last change (generated Go built for one platform left
// out of the index, for the cost) and -25 with the ranking it ships, both
// drawn at random and written before any of its tuning; the twenty-second
// tuned on -24, -25 and -26 too (-26, written for it, was partly read
// before its tuning) and measured -27, drawn at random and written at its
// start.
const (
	tuning = iota
	oldHeldOut
	thirdHeldOut // then the fifth pass's, the sixth's, the seventh's, the eighth's, the ninth's, the tenth's, the eleventh's, the twelfth's, the thirteenth's, the fourteenth's, the fifteenth's, the sixteenth's, the seventeenth's, the eighteenth's, the nineteenth's, the twentieth's, the twenty-first's, the twenty-second's, the twenty-third's, the twenty-fourth's, the twenty-fifth's, the twenty-sixth's, the twenty-seventh's
	fresh        = thirdHeldOut + len(passes)
)

// passes are the passes whose held-out files have joined the tuning.
var passes = [...]string{"third", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty-first", "twenty-second", "twenty-third", "twenty-fourth", "twenty-fifth", "twenty-sixth", "twenty-seventh"}

var setNames = func() (n [fresh + 1]string) {
	n[tuning], n[oldHeldOut], n[fresh] = "tuning", "old held-out", "fresh held-out"
	for i, p := range passes {
		n[thirdHeldOut+i] = p + "-pass held-out"
	}
	return n
}()

// corpus is a codebase the benchmark indexes and the questions asked of it.
type corpus struct {
	name      string
	questions string                              // file under testdata/questions
	heldOut   [len(passes)]string                 // the held-out questions of each of passes, idem
	fresh     string                              // the fresh held-out questions, idem
	next      []string                            // written ahead: checked by TestQuestions, not asked by the benchmark (-28 is the next held-out set)
	root      func(download bool) (string, error) // the directory to index
}

var corpora = []corpus{
	{"stdlib", "stdlib.txt", [...]string{"stdlib-3.txt", "stdlib-4.txt", "stdlib-5.txt", "stdlib-6.txt", "stdlib-7.txt", "stdlib-8.txt", "stdlib-9.txt", "stdlib-10.txt", "stdlib-11.txt", "stdlib-12.txt", "stdlib-13.txt", "stdlib-14.txt", "stdlib-15.txt", "stdlib-16.txt", "stdlib-17.txt", "stdlib-18.txt", "stdlib-19.txt", "stdlib-20.txt", "stdlib-21.txt", "stdlib-22.txt", "stdlib-23.txt", "stdlib-24.txt", "stdlib-25.txt", "stdlib-26.txt"}, "stdlib-27.txt", []string{"stdlib-28.txt"}, goroot},
	{"nats-server", "nats-server.txt", [...]string{"nats-server-3.txt", "nats-server-4.txt", "nats-server-5.txt", "nats-server-6.txt", "nats-server-7.txt", "nats-server-8.txt", "nats-server-9.txt", "nats-server-10.txt", "nats-server-11.txt", "nats-server-12.txt", "nats-server-13.txt", "nats-server-14.txt", "nats-server-15.txt", "nats-server-16.txt", "nats-server-17.txt", "nats-server-18.txt", "nats-server-19.txt", "nats-server-20.txt", "nats-server-21.txt", "nats-server-22.txt", "nats-server-23.txt", "nats-server-24.txt", "nats-server-25.txt", "nats-server-26.txt"}, "nats-server-27.txt", []string{"nats-server-28.txt"}, moduleDir("github.com/nats-io/nats-server/v2")},
}

// load reads the corpus's questions, the fresh held-out ones last.
func (c corpus) load() ([]question, error) {
	out, err := loadQuestions(c.questions, tuning)
	if err != nil {
		return nil, err
	}
	for i, name := range append(c.heldOut[:], c.fresh) {
		qs, err := loadQuestions(name, thirdHeldOut+i)
		if err != nil {
			return nil, err
		}
		out = append(out, qs...)
	}
	return out, nil
}

// goroot is $(go env GOROOT)/src.
func goroot(bool) (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src"), nil
}

// moduleDir finds a module of this module's build list in the module cache,
// downloading it first on a machine that does not have it yet: the version
// is the one go.mod pins, so every run indexes the same code.
func moduleDir(mod string) func(download bool) (string, error) {
	return func(download bool) (string, error) {
		dir := func() string {
			out, _ := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
			return strings.TrimSpace(string(out))
		}
		if d := dir(); d != "" {
			return d, nil
		}
		if !download {
			return "", fmt.Errorf("module %s is not in the module cache", mod)
		}
		if out, err := exec.Command("go", "mod", "download", mod).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go mod download %s: %w: %s", mod, err, out)
		}
		if d := dir(); d != "" {
			return d, nil
		}
		return "", fmt.Errorf("module %s: not in the module cache after go mod download", mod)
	}
}

// loadQuestions reads a questions file (question | files | symbol, # for
// comments), every question of set; in the tuning file every third one was
// held out (oldHeldOut).
func loadQuestions(name string, set int) ([]question, error) {
	f, err := os.Open(filepath.Join("testdata", "questions", name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []question
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: want question | files | symbol", name, n)
		}
		qset := set
		if set == tuning && len(out)%3 == 2 {
			qset = oldHeldOut
		}
		out = append(out, question{q: strings.TrimSpace(parts[0]), want: strings.Fields(parts[1]),
			symbol: strings.TrimSpace(parts[2]), set: qset})
	}
	return out, sc.Err()
}

// declares reports whether src declares symbol ("Name" or "Recv.Name").
func declares(src, symbol string) bool {
	name, recv := symbol, ""
	if i := strings.LastIndex(symbol, "."); i >= 0 {
		recv, name = symbol[:i], symbol[i+1:]
	}
	n := regexp.QuoteMeta(name)
	pat := `(?m)^(func|type|var|const) ` + n + `\b|^\t` + n + `\b`
	if recv != "" {
		pat = `(?m)^func \(\w* ?\*?` + regexp.QuoteMeta(recv) + `(\[[^\]]*\])?\) ` + n + `\b|^\t` + n + `\b`
	}
	return regexp.MustCompile(pat).MatchString(src)
}

// TestQuestions checks that every question's expected files exist and one of
// them declares its symbol, so a typo is an error and not a silent miss.
func TestQuestions(t *testing.T) {
	for _, c := range corpora {
		t.Run(c.name, func(t *testing.T) {
			qs, err := c.load()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range c.next {
				next, err := loadQuestions(name, fresh)
				if err != nil {
					t.Fatal(err)
				}
				qs = append(qs, next...)
			}
			seen := map[string]bool{}
			for _, q := range qs { // a fresh question asked before is not fresh
				if seen[strings.ToLower(q.q)] {
					t.Errorf("%q is asked twice", q.q)
				}
				seen[strings.ToLower(q.q)] = true
			}
			if testing.Short() && c.name != "stdlib" {
				t.Skip("needs the module cache")
			}
			root, err := c.root(false) // a test does not download: make bench-retriever does
			if err != nil {
				t.Skip(err)
			}
			checkQuestions(t, root, qs)
		})
	}
}

func checkQuestions(t testing.TB, root string, qs []question) {
	t.Helper()
	for _, q := range qs {
		found := false
		for _, w := range q.want {
			src, err := os.ReadFile(filepath.Join(root, w))
			if err != nil {
				t.Errorf("%q expects %s, which does not exist", q.q, w)
				continue
			}
			found = found || declares(string(src), q.symbol)
		}
		if !found {
			t.Errorf("%q expects symbol %s, which none of %v declares", q.q, q.symbol, q.want)
		}
	}
}

// cpuTime is the process's user and system CPU time so far. The searches run
// one at a time, so the CPU they use over a round, divided by the searches,
// is a cost per search that the machine's load does not inflate (the wall
// time of a search on a busy machine includes waiting for a core).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeProfile writes the named runtime profile to path, through a
// temporary file so a failed write leaves the previous one whole.
func writeProfile(path, name string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = pprof.Lookup(name).WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return os.Rename(tmp, path)
}

// peakRSS is the process's peak resident set (the embedded nats-server included).
func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// BenchmarkRetrieval indexes each corpus into its own embedded JetStream,
// builds a replica's local index from it, then measures search latency and
// relevance over the corpus's questions. It runs once whatever b.N (the
// index is the expensive part): go test -run '^$' -bench Retrieval -benchtime 1x.
// The fresh held-out questions are measured only with APTIX_BENCH_FRESH=1.
func BenchmarkRetrieval(b *testing.B) {
	for _, c := range corpora {
		b.Run(c.name, func(b *testing.B) { benchCorpus(b, c) })
	}
}

func benchCorpus(b *testing.B, c corpus) {
	qs, err := c.load()
	if err != nil {
		b.Fatal(err)
	}
	root, err := c.root(true)
	if err != nil {
		b.Fatal(err)
	}
	checkQuestions(b, root, qs)
	if b.Failed() {
		return
	}
	_, url := natstest.Start(b)
	_, js := natstest.Connect(b, url)
	ctx := context.Background()

	runtime.GC()
	var peakHeap atomic.Uint64
	stopSampling, sampled := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopSampling); <-sampled }) }
	defer stop() // a Fatal before the index is searchable stops it too
	// APTIX_BENCH_HEAPPROFILE (the standard library only), a diagnosis:
	// path.peak is what was live at a recent GC when the sampled heap
	// had grown by a twentieth since the last write, so near the peak;
	// writing it allocates, so that run's peak heap is not comparable.
	heapPath := os.Getenv("APTIX_BENCH_HEAPPROFILE")
	if c.name != "stdlib" {
		heapPath = ""
	}
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		var written uint64
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			if heapPath != "" && ms.HeapInuse > written*21/20 {
				if err := writeProfile(heapPath+".peak", "heap"); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
				written = ms.HeapInuse
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	start := time.Now()
	ix, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: b.TempDir(), K: 10})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	sum, err := retrieval.IndexDir(ctx, js, root, retrieval.IndexOptions{Workspace: c.name, Repo: c.name})
	if err != nil {
		b.Fatal(err)
	}
	stored := time.Since(start)
	if err := ix.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	searchable := time.Since(start)
	stop()
	if heapPath != "" { // what the process allocated so far, indexing the most of it (alloc_space)
		if err := writeProfile(heapPath, "allocs"); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var live runtime.MemStats
	runtime.ReadMemStats(&live) // what the index keeps, without the garbage of building it
	// APTIX_BENCH_INDEXONLY: the indexing's cost alone, no question asked.
	if os.Getenv("APTIX_BENCH_INDEXONLY") != "" {
		fmt.Fprintf(os.Stderr, "== %s: %s; searchable after %.1fs; peak heap %.0f MB, live heap after GC %.0f MB\n",
			c.name, sum, searchable.Seconds(), float64(peakHeap.Load())/(1<<20), float64(live.HeapInuse)/(1<<20))
		return
	}

	if dir := os.Getenv("APTIX_BENCH_TRAIN"); dir != "" {
		dumpPools(b, ix, c.name, qs, dir)
		return
	}
	if os.Getenv("APTIX_BENCH_GRID") != "" {
		grid(b, ix, c.name, qs)
	}
	if os.Getenv("APTIX_BENCH_ENGINES") != "" {
		engines(b, ix, c.name, qs)
	}
	if q := os.Getenv("APTIX_BENCH_EXPLAIN"); q != "" { // as aptix search --explain prints it
		res, err := ix.Search(ctx, contracts.AgentExecuteRequest{WorkspaceId: c.name, Instruction: q})
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%s: %q\nquery terms: %s\n", c.name, q, res.Query)
		for i, h := range res.Chunks[:min(3, len(res.Chunks))] {
			first, _, _ := strings.Cut(strings.TrimSpace(h.Content), "\n")
			fmt.Fprintf(os.Stderr, "%d. %s:%d-%d  %s  score %.2f\n     %s\n     matched: %s%s%s%s\n", i+1, h.Path, h.StartLine, h.EndLine, h.Language, h.Score, first, cli.Matches(h.Matches), cli.Akin(h.Akin), cli.NearBy(h.Near), cli.UsedBy(h.Uses))
		}
	}
	withFresh := os.Getenv("APTIX_BENCH_FRESH") != ""
	verbose := os.Getenv("APTIX_BENCH_VERBOSE") != ""
	var splits [len(setNames)]tally
	var lat, cold []time.Duration // cold: the first round, per-term caches empty
	const rounds = 10
	if path := os.Getenv("APTIX_BENCH_CPUPROFILE"); path != "" && c.name == "stdlib" { // the searches only, not the indexing
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := cpuTime()
	for round := range rounds {
		for _, q := range qs {
			if q.set == fresh && !withFresh {
				continue
			}
			t0 := time.Now()
			res, err := ix.Search(ctx, contracts.AgentExecuteRequest{WorkspaceId: c.name, Instruction: q.q})
			lat = append(lat, time.Since(t0))
			if round == 0 {
				cold = append(cold, lat[len(lat)-1])
			}
			if err != nil {
				b.Fatal(err)
			}
			if round > 0 {
				continue
			}
			s := &splits[q.set]
			rank := s.add(q, res)
			var got []string
			for _, c := range res.Chunks {
				got = append(got, fmt.Sprintf("%s:%d", c.Path, c.StartLine))
			}
			if rank < 0 {
				s.misses = append(s.misses, fmt.Sprintf("  miss %q (want %s %s) got %v", q.q, strings.Join(q.want, " "), q.symbol, got[:min(3, len(got))]))
			}
			if verbose {
				fmt.Fprintf(os.Stderr, "%s %-70q rank %2d  %v %v\n", setNames[q.set][:5], q.q, rank+1, ix.Expansions(q.q), got[:min(5, len(got))])
			}
		}
	}
	cpuPer := float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(len(lat))
	slices.Sort(lat)
	slices.Sort(cold)
	pctOf := func(lat []time.Duration, p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	pct := func(p float64) float64 { return pctOf(lat, p) }
	report := func(name string, s tally) {
		if s.n == 0 {
			return
		}
		n := float64(s.n)
		metric := strings.ReplaceAll(name, " ", "-") // a unit has no space
		b.ReportMetric(float64(s.at10)/n, metric+"_recall@10")
		b.ReportMetric(s.rr/n, metric+"_MRR")
		r10, mrr := s.interval()
		fmt.Fprintf(os.Stderr, "%s %s (%d questions): recall@5 %.3f, recall@10 %.3f%s, MRR %.3f%s, nDCG@10 %.3f, symbol@10 %.3f\n",
			c.name, name, s.n, float64(s.at5)/n, float64(s.at10)/n, r10, s.rr/n, mrr, s.ndcg/n, float64(s.sym)/n)
		for _, m := range s.misses {
			fmt.Fprintln(os.Stderr, m)
		}
	}
	b.ReportMetric(float64(sum.Files), "files")
	b.ReportMetric(float64(sum.TotalChunks), "chunks")
	b.ReportMetric(searchable.Seconds(), "searchable_s")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak_heap_MB")
	b.ReportMetric(float64(live.HeapInuse)/(1<<20), "live_heap_MB")
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(cpuPer, "cpu_ms/search")
	fmt.Fprintf(os.Stderr, "== %s: GOMAXPROCS %d; %s; stored in KV after %.1fs, searchable after %.1fs; peak heap %.0f MB, live heap after GC %.0f MB, peak RSS %.0f MB; %d searches: p50 %.2f ms, p99 %.2f ms (first round alone: p50 %.2f ms, p99 %.2f ms); CPU %.2f ms a search\n",
		c.name, runtime.GOMAXPROCS(0), sum, stored.Seconds(), searchable.Seconds(), float64(peakHeap.Load())/(1<<20), float64(live.HeapInuse)/(1<<20),
		float64(peakRSS())/(1<<20), len(lat), pct(0.5), pct(0.99), pctOf(cold, 0.5), pctOf(cold, 0.99), cpuPer)
	for i, s := range splits {
		report(setNames[i], s)
	}
	for range b.N {
	}
}

// grid measures the tuning questions (the old held-out ones included,
// reported apart) under each of a few weight settings, on the index already
// built: go test -bench Retrieval with APTIX_BENCH_GRID=1. With
// APTIX_BENCH_FRESH=1 the fresh held-out questions are measured too, in the
// cold pass only.
func grid(b *testing.B, ix *retrieval.Index, workspace string, qs []question) {
	base := retrieval.SetWeights(retrieval.Weights{})
	retrieval.SetWeights(base)
	defer retrieval.SetWeights(base)
	defer ix.ResetCaches()
	before := []func(w *retrieval.Weights){ // this pass's ranking, then the ones it replaced
		func(w *retrieval.Weights) {},
		func(w *retrieval.Weights) { w.Forest = nil }, // this pass's weights without its trees
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.TwentyFirstPassRerank, retrieval.TwentyFirstPassForest
		}, // the twenty-first pass's ranking (before the twenty-second)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.TwentiethPassRerank, retrieval.TwentiethPassForest
		}, // the twentieth pass's ranking (before the twenty-first)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.NineteenthPassRerank, retrieval.NineteenthPassForest
		}, // the nineteenth pass's ranking (before the twentieth)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.EighteenthPassRerank, retrieval.EighteenthPassForest
		}, // the eighteenth pass's ranking (before the nineteenth)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.SeventeenthPassRerank, retrieval.SeventeenthPassForest
		}, // the seventeenth pass's ranking (before the eighteenth)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.SixteenthPassRerank, retrieval.SixteenthPassForest
		}, // the sixteenth pass's ranking (before the seventeenth)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.FifteenthPassRerank, retrieval.FifteenthPassForest
		}, // the fifteenth pass's ranking (before the sixteenth)
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest = retrieval.FourteenthPassRerank, retrieval.FourteenthPassForest
		}, // the fourteenth pass's ranking (before the fifteenth), on today's chunk vectors
		func(w *retrieval.Weights) {
			w.Rerank, w.Forest, w.Near = retrieval.ThirteenthPassRerank, retrieval.ThirteenthPassForest, 0
		}, // the thirteenth pass's ranking (before the fourteenth)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.TwelfthPassRerank, nil, 0 },  // the twelfth pass's weights (before the thirteenth), on today's vectors
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.EleventhPassRerank, nil, 0 }, // the eleventh pass's ranking (before the twelfth)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.TenthPassRerank, nil, 0 },    // the tenth pass's ranking (before the eleventh)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.NinthPassRerank, nil, 0 },    // the ninth pass's ranking (before the tenth)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.EighthPassRerank, nil, 0 },   // the eighth pass's ranking (before the ninth)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.SeventhPassRerank, nil, 0 },  // the seventh pass's ranking (before the eighth)
		func(w *retrieval.Weights) { w.Rerank, w.Forest, w.Near = retrieval.IdentityRerank, nil, 0 },     // the fifth pass's ranking (before the sixth)
	}
	vary := append(before,
		func(w *retrieval.Weights) { w.Pool = 2 }, // the reranker's pool
		func(w *retrieval.Weights) { w.Pool = 8 },
		func(w *retrieval.Weights) { w.Usage = 0 },
		func(w *retrieval.Weights) { w.Coord = 0 },
		func(w *retrieval.Weights) {
			w.Usage = 0
			w.Pool = 1
			w.Coord = 0
			w.AbbrevShape = false
			w.Rerank, w.Forest = retrieval.IdentityRerank, nil
		}, // the fourth pass's ranking
	)
	if g := os.Getenv("APTIX_BENCH_GRID"); g != "" && g != "1" && g != "before" { // one setting: APTIX_BENCH_GRID=Usage=0.2,Pool=4
		vary = []func(w *retrieval.Weights){func(w *retrieval.Weights) { setFields(b, w, g) }}
	}
	if os.Getenv("APTIX_BENCH_GRID") == "before" { // this page's weights against the ones before, for the notes
		vary = before
	}
	withFresh := os.Getenv("APTIX_BENCH_FRESH") != ""
	verbose := os.Getenv("APTIX_BENCH_VERBOSE") != ""
	var first *splitTallies // the first setting's cold answers: the others are paired with them
	for _, v := range vary {
		w := base
		v(&w)
		retrieval.SetWeights(w)
		ix.ResetCaches()
		for pass := range 2 { // cold (per-term caches empty), then warm
			var against *splitTallies
			if pass == 0 {
				against = first
			}
			label := w
			label.Forest = nil // its size, not its trees
			splits := measure(b, ix, workspace, qs, withFresh && pass == 0, verbose && pass == 0 && w.Related > 0, fmt.Sprintf("grid %s %+v trees %d pass %d", workspace, label, len(w.Forest), pass), against)
			if first == nil {
				first = &splits
			}
		}
	}
}

// setFields sets weights named in spec ("Usage=0.2,Pool=4") by reflection.
func setFields(b *testing.B, w *retrieval.Weights, spec string) {
	v := reflect.ValueOf(w).Elem()
	for kv := range strings.SplitSeq(spec, ",") {
		k, val, _ := strings.Cut(kv, "=")
		f := v.FieldByName(k)
		if !f.IsValid() {
			b.Fatalf("no weight %q", k)
		}
		switch f.Kind() {
		case reflect.Float64:
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				b.Fatal(err)
			}
			f.SetFloat(x)
		case reflect.Int:
			x, err := strconv.Atoi(val)
			if err != nil {
				b.Fatal(err)
			}
			f.SetInt(int64(x))
		case reflect.Bool:
			f.SetBool(val == "true")
		}
	}
}

// engines measures the questions on bleve's query evaluation and on the
// scoring index (termindex), on the same index, alternating A, B, A, B, each
// side cold then warm: APTIX_BENCH_ENGINES=1 (the fresh held-out questions
// too, in the cold pass, with APTIX_BENCH_FRESH=1).
func engines(b *testing.B, ix *retrieval.Index, workspace string, qs []question) {
	defer ix.UseScoringIndex(true)
	defer ix.ResetCaches()
	withFresh := os.Getenv("APTIX_BENCH_FRESH") != ""
	for round := range 2 {
		for _, mem := range []bool{false, true} {
			ix.UseScoringIndex(mem)
			ix.ResetCaches()
			name := map[bool]string{false: "bleve", true: "termindex"}[mem]
			for pass := range 2 {
				measure(b, ix, workspace, qs, withFresh && pass == 0, false, fmt.Sprintf("engine %s %s round %d pass %d", workspace, name, round, pass), nil)
			}
		}
	}
}

// measure asks the tuning questions (the old held-out ones included,
// reported apart, and the fresh held-out ones when withFresh) once and
// prints the relevance figures per set, the latency of the tuning
// questions' searches and the CPU a search. verbose prints each question's
// rank and expansions.
func measure(b *testing.B, ix *retrieval.Index, workspace string, qs []question, withFresh, verbose bool, label string, against *splitTallies) (splits splitTallies) {
	var lat []time.Duration
	searches := 0
	cpu0 := cpuTime()
	for _, q := range qs {
		if q.set == fresh && !withFresh {
			continue
		}
		t0 := time.Now()
		res, err := ix.Search(context.Background(), contracts.AgentExecuteRequest{WorkspaceId: workspace, Instruction: q.q})
		if err != nil {
			b.Fatal(err)
		}
		searches++
		if q.set != fresh {
			lat = append(lat, time.Since(t0))
		}
		rank := -1
		for i := range splits {
			if i != q.set && (i != len(setNames) || q.set == fresh) {
				continue
			}
			rank = splits[i].add(q, res)
		}
		if verbose {
			fmt.Fprintf(os.Stderr, "  %s %-70q rank %2d  %v\n", setNames[q.set][:5], q.q, rank+1, ix.Expansions(q.q))
		}
	}
	cpuPer := float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(searches)
	slices.Sort(lat)
	ms := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	fmt.Fprintf(os.Stderr, "%s: p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms, CPU %.2f ms a search\n", label, ms(0.5), ms(0.9), ms(0.99), ms(1), cpuPer)
	for i, s := range splits {
		name := "all tuning"
		if i < len(setNames) {
			name = setNames[i]
		}
		if n := float64(s.n); n > 0 {
			r10, mrr := s.interval()
			vs := ""
			if against != nil {
				vs = "; against the grid's first: " + s.paired(&against[i])
			}
			fmt.Fprintf(os.Stderr, "  %s (%d): recall@5 %.3f recall@10 %.3f%s MRR %.3f%s nDCG@10 %.3f symbol@10 %.3f%s\n", name, s.n,
				float64(s.at5)/n, float64(s.at10)/n, r10, s.rr/n, mrr, s.ndcg/n, float64(s.sym)/n, vs)
		}
	}
	return splits
}

// splitTallies are measure's tallies: one a set, the last the tuning and
// old held-out questions together.
type splitTallies [len(setNames) + 1]tally

// tally adds up one set's answers: a question is answered at rank r when
// the r-th returned chunk lies in one of its files (recall@5/10, MRR and
// nDCG@10 with one relevant file), and its symbol is found when a top
// chunk of one of its files declares it (symbol@10).
type tally struct {
	n, at5, at10, sym int
	rr, ndcg          float64
	misses            []string
	rrs               []float64 // each question's reciprocal rank (0 for a miss), for interval
}

// interval is the 95% bootstrap interval of the set's recall@10 and MRR,
// each with a leading space, or "" for fewer than two questions: a set
// of 50 or 100 questions is a sample, and its figures are known only to
// within their intervals (paired compares two rankings).
func (s *tally) interval() (recall10, mrr string) {
	if len(s.rrs) < 2 {
		return "", ""
	}
	r := bootstrap(len(s.rrs), func(i int) float64 { // answered in the top 10
		if s.rrs[i] > 0 {
			return 1
		}
		return 0
	})
	m := bootstrap(len(s.rrs), func(i int) float64 { return s.rrs[i] })
	return fmt.Sprintf(" [%.2f–%.2f]", r[0], r[1]), fmt.Sprintf(" [%.2f–%.2f]", m[0], m[1])
}

// paired is the difference of MRR between two rankings' answers to the
// same questions (s minus base, question by question) and its 95%
// bootstrap interval: the questions are resampled once for both sides,
// so a set's easy and hard questions do not widen it as they widen each
// side's own interval.
func (s *tally) paired(base *tally) string {
	if len(s.rrs) < 2 || len(base.rrs) != len(s.rrs) {
		return ""
	}
	var d float64
	for i := range s.rrs {
		d += s.rrs[i] - base.rrs[i]
	}
	ci := bootstrap(len(s.rrs), func(i int) float64 { return s.rrs[i] - base.rrs[i] })
	return fmt.Sprintf("MRR %+.3f [%+.3f–%+.3f]", d/float64(len(s.rrs)), ci[0], ci[1])
}

// bootstrap is the 95% percentile interval of the mean of v(i) over n
// questions, from 2,000 resamples with a fixed seed (the same run prints
// the same interval).
func bootstrap(n int, v func(i int) float64) [2]float64 {
	const resamples = 2000
	rng := rand.New(rand.NewPCG(1, 2))
	means := make([]float64, resamples)
	for k := range means {
		var sum float64
		for range n {
			sum += v(rng.IntN(n))
		}
		means[k] = sum / float64(n)
	}
	slices.Sort(means)
	return [2]float64{means[int(0.025*resamples)], means[int(0.975*resamples)-1]}
}

// add counts q's answer res and returns its rank (0-based, -1 for a miss).
func (s *tally) add(q question, res contracts.Retrieval) int {
	s.n++
	rank := slices.IndexFunc(res.Chunks, func(c contracts.RagChunk) bool { return slices.Contains(q.want, c.Path) })
	s.rrs = append(s.rrs, 0)
	if rank >= 0 {
		s.rrs[len(s.rrs)-1] = 1 / float64(rank+1)
		s.at10++
		if rank < 5 {
			s.at5++
		}
		s.rr += 1 / float64(rank+1)
		s.ndcg += 1 / math.Log2(float64(rank+2))
	}
	if slices.ContainsFunc(res.Chunks, func(c contracts.RagChunk) bool {
		return slices.Contains(q.want, c.Path) && declares(c.Content, q.symbol)
	}) {
		s.sym++
	}
	return rank
}

// TestBootstrap: the intervals the benchmark prints hold the mean, are
// empty for a constant, and a ranking paired with itself differs by 0.
func TestBootstrap(t *testing.T) {
	if ci := bootstrap(5, func(int) float64 { return 0.5 }); ci != [2]float64{0.5, 0.5} {
		t.Errorf("a constant's interval %v, want [0.5 0.5]", ci)
	}
	s := tally{rrs: []float64{1, 0.5, 0, 1, 0.25, 0, 1, 1, 0.2, 0.1}}
	ci := bootstrap(len(s.rrs), func(i int) float64 { return s.rrs[i] })
	if mean := 0.505; ci[0] >= mean || ci[1] <= mean || ci[0] < 0 || ci[1] > 1 {
		t.Errorf("interval %v does not hold the mean %v within [0, 1]", ci, mean)
	}
	if ci != bootstrap(len(s.rrs), func(i int) float64 { return s.rrs[i] }) {
		t.Error("two runs give two intervals: the seed is not fixed")
	}
	if got := s.paired(&s); got != "MRR +0.000 [+0.000–+0.000]" {
		t.Errorf("paired with itself: %q", got)
	}
	better := tally{rrs: slices.Clone(s.rrs)}
	better.rrs[2] = 1 // one miss found first
	if got := better.paired(&s); got != "MRR +0.100 [+0.000–+0.300]" {
		t.Errorf("one question of ten from a miss to the first: %q", got)
	}
}
