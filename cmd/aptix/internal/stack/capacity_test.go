package stack

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// tinyStreams is small enough that a burst of turns overflows the queue and
// APTIX many times over, with history trimmed every 200 ms.
var tinyStreams = layout.StreamConfig{
	QueueMaxBytes: 16 << 10, WorkMaxBytes: 256 << 10, HistoryMaxBytes: 64 << 10,
	CompletionGrace: time.Second, TrimEvery: 200 * time.Millisecond,
}

// TestFullStreamsRefuseLoudlyAndLoseNothing (docs/architecture.md#work-is-not-history): with
// a tiny work capacity and the model answering after 2 s, far more turns are
// offered than fit. Every publish is either acknowledged or refused with
// ErrAtCapacity; every acknowledged turn completes exactly once and reaches
// the model once; history trimming never removed unfinished work.
func TestFullStreamsRefuseLoudlyAndLoseNothing(t *testing.T) { fullStreams(t, tinyStreams) }

// TestFullStreamsWithinGraceLoseNothing is the same burst with completions
// kept 10 minutes whatever their size, so they soon fill the history room:
// every acknowledged turn still completes, or is answered at_capacity when
// it waited AdmitTimeout for room, and no model call is paid for a turn that
// does not complete. Before admission counted every event a turn still
// adds, 59 of 127 acknowledged turns stalled, 127 model calls paid for 68
// completions. Before the trimmer relieved a stream full of completions in
// their grace (PressureGrace), about one run in three left 1-3 acknowledged
// turns, some already paid, unable to store their results.
func TestFullStreamsWithinGraceLoseNothing(t *testing.T) {
	streams := tinyStreams
	streams.CompletionGrace, streams.AdmitTimeout = 10*time.Minute, 10*time.Second
	// Completions fill the stream within their 10 minutes: the trimmer's
	// pressure relief (3 s here, 1 minute by default) makes room.
	streams.PressureGrace = 3 * time.Second
	fullStreams(t, streams)
}

func fullStreams(t *testing.T, streams layout.StreamConfig) {
	e := newEnv(t, sandbox.Options{Latency: 2 * time.Second}, func(c *Config) {
		c.Stream = streams
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 60*time.Second
		c.Profiles.Put(p)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	comp, err := client.WatchCompletions(ctx, e.js, "*")
	if err != nil {
		t.Fatal(err)
	}
	defer comp.Stop()

	const offered = 400
	var (
		mu       sync.Mutex
		accepted []string
		refused  atomic.Int32
		other    []error
	)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range offered {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("t%03d", i)
			err := client.Submit(ctx, e.js, contracts.AgentExecuteRequest{ConversationId: "burst", TurnId: id, Instruction: "turn " + id, RagScope: contracts.RagScopeNone})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, id)
			case backpressure.IsAtCapacity(err):
				refused.Add(1)
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d publishes failed for another reason than capacity, first: %v", len(other), other[0])
	}
	if refused.Load() == 0 {
		t.Fatalf("no publish was refused: the capacities are not tiny enough to test backpressure")
	}
	completed, atCapacity, lost := 0, 0, 0
	for _, id := range accepted {
		wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
		turn, err := comp.Wait(wctx, "burst", id)
		wcancel()
		switch {
		case err != nil:
			lost++
		case turn.Response != nil && turn.Response.Kind == contracts.KindOK:
			completed++
		case turn.Failure != nil && turn.Failure.Code == pipeline.CodeAtCapacity && turn.LLM == nil:
			atCapacity++ // waited AdmitTimeout for room; never reached the model
		default:
			t.Errorf("turn %s completed with %+v", id, turn.Response)
		}
	}
	time.Sleep(300 * time.Millisecond) // a duplicate completion would arrive by now
	_, dups, bad := comp.Counts()
	t.Logf("offered %d, acknowledged %d, refused %d, completed %d, answered at_capacity %d, lost %d, duplicate completions %d, upstream calls %d",
		offered, len(accepted), refused.Load(), completed, atCapacity, lost, dups, e.sb.Requests())
	if lost != 0 || dups != 0 || bad != 0 {
		t.Fatalf("lost %d, duplicates %d, undecodable %d", lost, dups, bad)
	}
	if int(refused.Load())+len(accepted) != offered {
		t.Fatalf("acknowledged %d + refused %d != offered %d", len(accepted), refused.Load(), offered)
	}
	if e.sb.Requests() != completed {
		t.Fatalf("%d upstream calls for %d completed turns", e.sb.Requests(), completed)
	}
	e.settled()
}

// TestFullPipelineAnswersEveryAcceptedTurn: with small limits and the
// default completion grace (completions kept 10 minutes whatever their
// size), far more HTTP requests are offered than fit. Each is answered:
// refused at once with 503 and Retry-After (the queue is full), or, once
// accepted, completed or answered at_capacity (503 with Retry-After) within
// a bounded time: no request waits for completions to age out, and no model
// call is paid for a turn that then cannot finish. Before the admission
// counted every event a turn still adds, accepted turns stalled with their
// model calls paid until the grace ran out.
func TestFullPipelineAnswersEveryAcceptedTurn(t *testing.T) {
	streams := tinyStreams
	streams.CompletionGrace = 10 * time.Minute
	streams.AdmitTimeout = 5 * time.Second
	e := newEnv(t, sandbox.Options{Latency: 500 * time.Millisecond}, func(c *Config) {
		c.Stream = streams
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 60*time.Second
		c.Profiles.Put(p)
	})
	base, _ := e.gateway(func(c *httpapi.Config) { c.SyncTimeout = 90 * time.Second })
	const offered = 300
	var (
		mu                                  sync.Mutex
		completed, refused, atCapacity, bad int
		slowest                             time.Duration
		firstBad                            string
	)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	start := time.Now()
	for i := range offered {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := fmt.Sprintf(`{"model":"sandbox-1","input":"turn %03d of a burst, padded so events have a size: %s"}`, i, strings.Repeat("x", 200))
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			var got []byte
			if err == nil {
				got, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, time.Since(t0))
			switch {
			case err != nil:
				bad++
				firstBad = cmp.Or(firstBad, err.Error())
			case resp.StatusCode == 200 && strings.Contains(string(got), `"status":"completed"`):
				completed++
			case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" && strings.Contains(string(got), `"code":"at_capacity"`):
				atCapacity++
			case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
				refused++
			default:
				bad++
				firstBad = cmp.Or(firstBad, fmt.Sprintf("%d %s", resp.StatusCode, got))
			}
		}()
	}
	wg.Wait()
	t.Logf("offered %d in %s: completed %d, refused at once %d, answered at_capacity %d, other %d; slowest answer %s; upstream calls %d",
		offered, time.Since(start).Round(time.Millisecond), completed, refused, atCapacity, bad, slowest.Round(time.Millisecond), e.sb.Requests())
	if bad > 0 {
		t.Fatalf("%d request(s) not answered as completed or 503 with Retry-After, first: %s", bad, firstBad)
	}
	if refused == 0 {
		t.Fatal("no request was refused: the limits are not small enough to test backpressure")
	}
	if completed == 0 {
		t.Fatal("no request completed")
	}
	if e.sb.Requests() != completed {
		t.Fatalf("%d upstream calls for %d completed turns: a paid call's turn did not complete", e.sb.Requests(), completed)
	}
}
