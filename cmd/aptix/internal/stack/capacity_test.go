package stack

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// tinyStreams is small enough that a burst of turns overflows the queue and
// APTIX many times over, with history trimmed every 200 ms.
var tinyStreams = pipeline.StreamConfig{
	QueueMaxBytes: 16 << 10, WorkMaxBytes: 256 << 10, HistoryMaxBytes: 64 << 10,
	CompletionGrace: time.Second, TrimEvery: 200 * time.Millisecond,
}

// TestFullStreamsRefuseLoudlyAndLoseNothing (docs/architecture.md#work-is-not-history): with
// a tiny work capacity and the model answering after 2 s, far more turns are
// offered than fit. Every publish is either acknowledged or refused with
// ErrAtCapacity; every acknowledged turn completes exactly once and reaches
// the model once; history trimming never removed unfinished work.
func TestFullStreamsRefuseLoudlyAndLoseNothing(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 2 * time.Second}, func(c *Config) {
		c.Stream = tinyStreams
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 60*time.Second
		c.Profiles.Put(p)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	comp, err := pipeline.WatchCompletions(ctx, e.js, "*")
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
			err := pipeline.Submit(ctx, e.js, contracts.AgentExecuteRequest{ConversationId: "burst", TurnId: id, Instruction: "turn " + id, RagScope: contracts.RagScopeNone})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, id)
			case pipeline.IsAtCapacity(err):
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
	completed, lost := 0, 0
	for _, id := range accepted {
		wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
		turn, err := comp.Wait(wctx, "burst", id)
		wcancel()
		if err != nil {
			lost++
			continue
		}
		if turn.Response == nil || turn.Response.Kind != contracts.KindOK {
			t.Errorf("turn %s completed with %+v", id, turn.Response)
		}
		completed++
	}
	time.Sleep(300 * time.Millisecond) // a duplicate completion would arrive by now
	_, dups, bad := comp.Counts()
	t.Logf("offered %d, acknowledged %d, refused %d, completed %d, lost %d, duplicate completions %d, upstream calls %d",
		offered, len(accepted), refused.Load(), completed, lost, dups, e.sb.Requests())
	if lost != 0 || dups != 0 || bad != 0 {
		t.Fatalf("lost %d, duplicates %d, undecodable %d", lost, dups, bad)
	}
	if int(refused.Load())+len(accepted) != offered {
		t.Fatalf("acknowledged %d + refused %d != offered %d", len(accepted), refused.Load(), offered)
	}
	if e.sb.Requests() != len(accepted) {
		t.Fatalf("%d upstream calls for %d turns", e.sb.Requests(), len(accepted))
	}
	e.settled()
}
