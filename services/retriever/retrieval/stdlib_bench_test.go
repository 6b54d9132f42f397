package retrieval_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// relevanceQueries are questions a developer might ask about the Go
// standard library, each with the file(s) they would want to see. They were
// written from knowledge of the standard library before the retriever was
// ever run on it, and have not been tuned to its results since; an expected
// path was only corrected where the file does not exist in this Go version
// (the benchmark fails on such a path rather than count a silent miss).
var relevanceQueries = []struct {
	q    string
	want []string
}{
	{"parse a duration string like 1h30m", []string{"time/format.go"}},
	{"format a time value using a layout string", []string{"time/format.go"}},
	{"read a file line by line with a scanner", []string{"bufio/scan.go"}},
	{"sort a slice with a custom less function", []string{"sort/slice.go", "slices/sort.go"}},
	{"compute the sha256 checksum of data", []string{"crypto/sha256/sha256.go"}},
	{"encode a struct as JSON", []string{"encoding/json/encode.go"}},
	{"decode JSON values from a stream", []string{"encoding/json/stream.go"}},
	{"escape HTML special characters", []string{"html/escape.go", "html/template/escape.go", "html/template/html.go"}},
	{"open a TCP connection with a timeout", []string{"net/dial.go"}},
	{"http client following redirects", []string{"net/http/client.go"}},
	{"serve static files over http", []string{"net/http/fs.go"}},
	{"mutex lock and unlock", []string{"sync/mutex.go"}},
	{"wait for a group of goroutines to finish", []string{"sync/waitgroup.go"}},
	{"run a function only once", []string{"sync/once.go"}},
	{"context with a deadline and cancellation", []string{"context/context.go"}},
	{"join path elements and clean the result", []string{"path/filepath/path.go", "path/path.go"}},
	{"walk a directory tree recursively", []string{"path/filepath/path.go", "io/fs/walk.go"}},
	{"compile a regular expression", []string{"regexp/regexp.go"}},
	{"convert a string to an integer", []string{"strconv/number.go", "internal/strconv/atoi.go"}},
	{"format a floating point number as a string", []string{"strconv/number.go", "internal/strconv/ftoa.go"}},
	{"split a string by a separator", []string{"strings/strings.go"}},
	{"build a string efficiently from pieces", []string{"strings/builder.go"}},
	{"gzip compress a stream", []string{"compress/gzip/gzip.go"}},
	{"read the files of a zip archive", []string{"archive/zip/reader.go"}},
	{"base64 encode bytes", []string{"encoding/base64/base64.go"}},
	{"parse a URL and its query parameters", []string{"net/url/url.go"}},
	{"generate random numbers", []string{"math/rand/rand.go", "math/rand/v2/rand.go"}},
	{"execute an external command and capture its output", []string{"os/exec/exec.go"}},
	{"read environment variables", []string{"os/env.go", "syscall/env_unix.go"}},
	{"structured logging with levels", []string{"log/slog/logger.go", "log/slog/level.go"}},
	{"TLS client handshake", []string{"crypto/tls/handshake_client.go", "crypto/tls/handshake_client_tls13.go"}},
	{"parse command line flags", []string{"flag/flag.go"}},
	{"big integer arithmetic", []string{"math/big/int.go", "math/big/nat.go"}},
	{"decode a UTF-8 rune from bytes", []string{"unicode/utf8/utf8.go"}},
	{"read CSV records", []string{"encoding/csv/reader.go"}},
	{"hex dump of bytes", []string{"encoding/hex/hex.go"}},
	{"garbage collector mark phase", []string{"runtime/mgcmark.go", "runtime/mgc.go"}},
	{"goroutine scheduler finds a runnable goroutine", []string{"runtime/proc.go"}},
	{"hash map growth when too many entries", []string{"internal/runtime/maps/map.go", "internal/runtime/maps/table.go", "runtime/map.go"}},
	{"parse Go source code into a syntax tree", []string{"go/parser/parser.go", "go/parser/interface.go"}},
	{"format Go source code", []string{"go/format/format.go", "go/printer/printer.go"}},
	{"SQL database connection pool", []string{"database/sql/sql.go"}},
	{"get a struct field by name with reflection", []string{"reflect/type.go", "reflect/value.go"}},
	{"copy data from a reader to a writer", []string{"io/io.go"}},
	{"flush a buffered writer", []string{"bufio/bufio.go"}},
	{"atomic compare and swap", []string{"sync/atomic/doc.go", "sync/atomic/type.go"}},
	{"parse a multipart form upload", []string{"mime/multipart/formdata.go", "mime/multipart/multipart.go", "net/http/request.go"}},
	{"set a cookie on an http response", []string{"net/http/cookie.go"}},
	{"resolve a host name with DNS", []string{"net/lookup.go", "net/dnsclient_unix.go"}},
	{"execute a text template with data", []string{"text/template/exec.go"}},
}

// peakRSS is the process's peak resident set (the embedded nats-server included).
func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// BenchmarkStdlib indexes $(go env GOROOT)/src into an embedded JetStream,
// builds a replica's local index from it, then measures search latency and
// relevance over relevanceQueries. It runs once whatever b.N (the index is
// the expensive part): go test -run '^$' -bench Stdlib -benchtime 1x.
func BenchmarkStdlib(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	for _, q := range relevanceQueries {
		for _, w := range q.want {
			if _, err := os.Stat(filepath.Join(src, w)); err != nil {
				b.Fatalf("query %q expects %s, which does not exist: %v", q.q, w, err)
			}
		}
	}
	_, url := natstest.Start(b)
	_, js := natstest.Connect(b, url)
	ctx := context.Background()

	var peakHeap atomic.Uint64
	stopSampling := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
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
	sum, err := retrieval.IndexDir(ctx, js, src, retrieval.IndexOptions{Workspace: "go", Repo: "std"})
	if err != nil {
		b.Fatal(err)
	}
	stored := time.Since(start)
	if err := ix.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	searchable := time.Since(start)
	close(stopSampling)

	// Relevance and latency over the same queries, each run 20 times.
	var lat []time.Duration
	hits, rr := 0, 0.0
	for round := range 20 {
		for _, q := range relevanceQueries {
			t0 := time.Now()
			res, err := ix.Search(ctx, contracts.AgentExecuteRequest{WorkspaceId: "go", Instruction: q.q})
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if round > 0 {
				continue
			}
			rank := slices.IndexFunc(res.Chunks, func(c contracts.RagChunk) bool { return slices.Contains(q.want, c.Path) })
			if rank >= 0 {
				hits++
				rr += 1 / float64(rank+1)
			}
			if os.Getenv("APTIX_BENCH_VERBOSE") != "" {
				var got []string
				for _, c := range res.Chunks {
					got = append(got, fmt.Sprintf("%s:%d", c.Path, c.StartLine))
				}
				fmt.Fprintf(os.Stderr, "%-55q rank %2d  %v\n", q.q, rank+1, got)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	n := float64(len(relevanceQueries))
	b.ReportMetric(float64(sum.Files), "files")
	b.ReportMetric(float64(sum.TotalChunks), "chunks")
	b.ReportMetric(stored.Seconds(), "store_s")
	b.ReportMetric(searchable.Seconds(), "searchable_s")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak_heap_MB")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak_rss_MB")
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(hits)/n, "recall@10")
	b.ReportMetric(rr/n, "MRR")
	fmt.Fprintf(os.Stderr, "GOMAXPROCS %d; %s; stored in KV after %.1fs, searchable after %.1fs; %d queries × 20: p50 %.2f ms, p99 %.2f ms; recall@10 %.2f, MRR %.3f over %d queries",
		runtime.GOMAXPROCS(0), sum, stored.Seconds(), searchable.Seconds(), len(relevanceQueries), pct(0.5), pct(0.99), float64(hits)/n, rr/n, len(relevanceQueries))
	fmt.Fprintln(os.Stderr)
	for range b.N {
	}
}
