package loadgen

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// envFakeAptix makes the test binary play an aptix binary: `sandbox` and
// `up` with the flags and output Bench relies on, so the driver's process
// handling (ports, the listening line, /readyz, the environment, the
// interrupt) is tested without building Aptix.
const envFakeAptix = "LOADGEN_TEST_FAKE_APTIX"

func TestMain(m *testing.M) {
	if os.Getenv(envFakeAptix) == "1" {
		if err := fakeAptix(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake aptix:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeAptix serves the real sandbox for `sandbox`, and for `up` a reverse
// proxy to APTIX_SANDBOX_URL (which it must be given) with /readyz, until
// interrupted.
func fakeAptix(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	addr := fs.String("addr", "", "")
	httpAddr := fs.String("http", "", "")
	fs.String("data", "", "")
	fs.String("listen", "", "")
	fs.String("mcp", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var h http.Handler
	switch args[0] {
	case "sandbox":
		h = sandbox.New(sandbox.Options{Logger: slog.New(slog.DiscardHandler)})
	case "up":
		if os.Getenv("OPENAI_API_KEY") != "" {
			return fmt.Errorf("OPENAI_API_KEY reached up")
		}
		u, err := url.Parse(os.Getenv("APTIX_SANDBOX_URL"))
		if err != nil || u.Host == "" {
			return fmt.Errorf("APTIX_SANDBOX_URL %q", os.Getenv("APTIX_SANDBOX_URL"))
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /readyz", func(http.ResponseWriter, *http.Request) {})
		mux.Handle("/v1/", httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: u.Host}))
		h, *addr = mux, *httpAddr
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if args[0] == "sandbox" {
		fmt.Printf("aptix sandbox (NOT a model) listening on http://%s/v1\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { _ = http.Serve(ln, h) }()
	<-ctx.Done()
	return nil
}

func TestBenchRunsServersAsProcesses(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envFakeAptix, "1")
	t.Setenv("OPENAI_API_KEY", "sk-must-not-reach-up") // the driver strips it
	var lines []string
	rep, err := Bench(context.Background(), BenchOptions{Bins: []string{self, self}, Rounds: 2, Concurrencies: []int{1, 4},
		Requests: map[int]int{1: 20, 4: 40}, Warmup: 2, Model: "sandbox-1", Input: "hi", Dir: t.TempDir(),
		Progress: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	// 2 rounds × 2 concurrencies × (direct, A, B).
	if len(rep.Samples) != 12 || len(lines) != 12 {
		t.Fatalf("%d samples and %d progress lines, want 12", len(rep.Samples), len(lines))
	}
	var order []string
	for _, s := range rep.Samples {
		if s.Errors != 0 || s.Requests != map[int]int{1: 20, 4: 40}[s.Concurrency] {
			t.Errorf("sample %+v: want every request answered", s)
		}
		if s.Side != "direct" && s.SandboxCPUMs < 0 {
			t.Errorf("sample %+v: negative sandbox CPU", s)
		}
		if s.Concurrency == 1 {
			order = append(order, s.Side)
		}
	}
	if got := strings.Join(order, ","); got != "direct,A,B,direct,B,A" {
		t.Errorf("order at concurrency 1 over the rounds: %s, want direct,A,B then direct,B,A", got)
	}
	// Only the added p50 and p99 at 1 for A and B: no run at 64, no tool loops.
	if len(rep.Summary.Goals) != 4 {
		t.Errorf("%d goals judged, want 4: %+v", len(rep.Summary.Goals), rep.Summary.Goals)
	}
}
