// Package loadgen is an external load generator for the HTTP gateway: an
// openai-go client in a closed loop, in a process of its own, so the CPU a
// server spends per request is read from /proc apart from the client's.
// It speaks only HTTP, so it measures any build of Aptix (or anything else
// serving POST /v1/responses), and the sandbox straight, for the floor.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// Options is one closed-loop run.
type Options struct {
	BaseURL     string // e.g. http://127.0.0.1:8080/v1
	APIKey      string // sent as a bearer token; the sandbox and an open gateway ignore it
	Model       string
	Input       string
	Concurrency int
	Warmup      int  // requests sent first, not timed
	Requests    int  // timed requests
	Stream      bool // stream each response (SSE) and time it to response.completed
	// ServerPID, when not 0, is the process whose CPU (user + system, every
	// thread) is read around the timed requests; SandboxPID likewise, so a
	// gateway's run can show the model's share apart.
	ServerPID, SandboxPID int
}

// Result is what one run measured. Latencies are in milliseconds; CPU per
// request is the process's CPU over the timed window divided by the
// requests answered in it.
type Result struct {
	Concurrency int     `json:"concurrency"`
	Stream      bool    `json:"stream,omitempty"`
	Requests    int     `json:"requests"` // answered, timed
	Errors      int     `json:"errors"`
	FirstError  string  `json:"firstError,omitempty"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"perSecond"`
	P50         float64 `json:"p50Ms"`
	P90         float64 `json:"p90Ms"`
	P99         float64 `json:"p99Ms"`
	Max         float64 `json:"maxMs"`
	// ServerCPUMs is the server's CPU per request (ms); 0 without a pid.
	ServerCPUMs  float64 `json:"serverCpuMsPerRequest,omitempty"`
	SandboxCPUMs float64 `json:"sandboxCpuMsPerRequest,omitempty"`
	ClientCPUMs  float64 `json:"clientCpuMsPerRequest"`
}

// Err is the run's failure when any request failed: a run that lost
// requests has no figures worth printing.
func (r Result) Err() error {
	if r.Errors == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d requests failed; first: %s", r.Errors, r.Errors+r.Requests, r.FirstError)
}

// NewClient is an openai-go client for base with an idle connection kept
// per worker (a new TCP connection per call would measure the kernel) and
// no retries (a retried request would hide a failure and skew its time).
func NewClient(base, key string, concurrency int) openai.Client {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * concurrency, MaxIdleConnsPerHost: 2 * concurrency}}
	return openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(key), option.WithHTTPClient(hc), option.WithMaxRetries(0))
}

// Run sends o.Warmup then o.Requests requests, each of o.Concurrency
// workers waiting for its answer before the next, and times the latter.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Concurrency < 1 || o.Requests < 1 {
		return Result{}, errors.New("loadgen: concurrency and requests must be at least 1")
	}
	client := NewClient(o.BaseURL, o.APIKey, o.Concurrency)
	params := responses.ResponseNewParams{Model: o.Model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(o.Input)}}
	one := func(ctx context.Context) error { return create(ctx, client, params) }
	if o.Stream {
		one = func(ctx context.Context) error { return stream(ctx, client, params) }
	}
	if o.Warmup > 0 {
		if w := loop(ctx, o.Warmup, o.Concurrency, one); w.errs > 0 {
			return Result{}, fmt.Errorf("loadgen: warm-up: %d of %d requests failed; first: %w", w.errs, o.Warmup, w.first)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	cpu := func() (server, sandbox, self time.Duration, err error) {
		if o.ServerPID != 0 {
			if server, err = ProcessCPU(o.ServerPID); err != nil {
				return
			}
		}
		if o.SandboxPID != 0 {
			if sandbox, err = ProcessCPU(o.SandboxPID); err != nil {
				return
			}
		}
		self, err = SelfCPU()
		return
	}
	s0, b0, c0, err := cpu()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	l := loop(ctx, o.Requests, o.Concurrency, one)
	el := time.Since(start)
	s1, b1, c1, err := cpu()
	if err != nil {
		return Result{}, err
	}
	r := Result{Concurrency: o.Concurrency, Stream: o.Stream, Requests: len(l.lat), Errors: l.errs, Seconds: round3(el.Seconds())}
	if l.first != nil {
		r.FirstError = l.first.Error()
	}
	if n := len(l.lat); n > 0 {
		sort.Slice(l.lat, func(i, j int) bool { return l.lat[i] < l.lat[j] })
		r.P50, r.P90, r.P99, r.Max = ms(pct(l.lat, 50)), ms(pct(l.lat, 90)), ms(pct(l.lat, 99)), ms(l.lat[n-1])
		r.PerSecond = round3(float64(n) / el.Seconds())
		per := func(d time.Duration) float64 { return round3(float64(d) / 1e6 / float64(n)) }
		if o.ServerPID != 0 {
			r.ServerCPUMs = per(s1 - s0)
		}
		if o.SandboxPID != 0 {
			r.SandboxCPUMs = per(b1 - b0)
		}
		r.ClientCPUMs = per(c1 - c0)
	}
	return r, nil
}

// create is one non-streaming POST /v1/responses; an answer that is not a
// completed response with text counts as a failure.
func create(ctx context.Context, c openai.Client, p responses.ResponseNewParams) error {
	r, err := c.Responses.New(ctx, p)
	if err != nil {
		return err
	}
	if r.Status != responses.ResponseStatusCompleted {
		return fmt.Errorf("response %s: status %q", r.ID, r.Status)
	}
	if r.OutputText() == "" {
		return fmt.Errorf("response %s: no output text", r.ID)
	}
	return nil
}

// stream is one streamed POST /v1/responses, read to its response.completed
// event.
func stream(ctx context.Context, c openai.Client, p responses.ResponseNewParams) error {
	s := c.Responses.NewStreaming(ctx, p)
	defer s.Close()
	completed := false
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.completed" {
			completed = true
		} else if ev.Type == "response.failed" || ev.Type == "error" {
			return fmt.Errorf("stream: %s event", ev.Type)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	if !completed {
		return errors.New("stream ended without response.completed")
	}
	return nil
}

type looped struct {
	lat   []time.Duration
	errs  int
	first error
}

// loop runs op n times over concurrency workers and times each success.
func loop(ctx context.Context, n, concurrency int, op func(context.Context) error) looped {
	var (
		next atomic.Int64
		mu   sync.Mutex
		out  = looped{lat: make([]time.Duration, 0, n)}
		wg   sync.WaitGroup
	)
	for range concurrency {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/concurrency+1)
			var errs int
			var first error
			for int(next.Add(1)) <= n && ctx.Err() == nil {
				t0 := time.Now()
				if err := op(ctx); err != nil {
					errs++
					first = cmpErr(first, err)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			out.lat = append(out.lat, local...)
			out.errs += errs
			out.first = cmpErr(out.first, first)
		})
	}
	wg.Wait()
	return out
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// pct is the nearest-rank percentile of sorted s.
func pct(s []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return round3(float64(d) / 1e6) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
