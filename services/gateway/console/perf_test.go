package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
)

// seedMany stores n conversations of one whole turn each (four events, a
// realistic ~3 KB enveloped body with a [CONTEXT] block), published
// asynchronously.
func (e *env) seedMany(n int) {
	e.t.Helper()
	ctx := context.Background()
	block := contextblock.Format(chunks, contextblock.Options{}).Text
	var futures []jetstream.PubAckFuture
	for i := range n {
		conv, turn := fmt.Sprintf("c-%05d", i), fmt.Sprintf("t-%05d", i)
		t := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: conv, TurnId: turn, Instruction: "Explain the retry policy, please"})
		t.Retrieval = &contracts.Retrieval{Chunks: chunks, TookMs: 1.5}
		for _, st := range history4 {
			switch st {
			case contracts.StageEnveloped:
				body, _ := json.Marshal(map[string]any{"model": "sandbox-1", "input": []any{map[string]any{"type": "message", "role": "user",
					"content": []any{map[string]any{"type": "input_text", "text": "Explain"}, map[string]any{"type": "input_text", "text": block}}}}})
				t.Envelope = &contracts.Envelope{Backend: "sandbox", Model: "sandbox-1", Body: body}
			case contracts.StageResponded:
				t.LLM = &contracts.LLMResult{Backend: "sandbox", Status: 200, Body: `{"id":"resp_x","status":"completed","output":[]}`, Attempts: 1}
			case contracts.StageCompleted:
				kind := contracts.KindOK
				if i%50 == 0 {
					kind = contracts.KindError
				}
				t.Response = &contracts.AgentExecuteResponse{Kind: kind, ConversationId: conv, TurnId: turn, Text: "Retries back off exponentially."}
			}
			data, _ := json.Marshal(t)
			m := nats.NewMsg(contracts.Subject(st, conv, turn))
			m.Data = data
			f, err := e.js.PublishMsgAsync(m)
			if err != nil {
				e.t.Fatal(err)
			}
			futures = append(futures, f)
		}
		if len(futures) >= 4000 {
			waitAcks(e.t, ctx, e.js, futures)
			futures = futures[:0]
		}
	}
	waitAcks(e.t, ctx, e.js, futures)
}

var history4 = []string{contracts.StageRetrieved, contracts.StageEnveloped, contracts.StageResponded, contracts.StageCompleted}

func waitAcks(t testing.TB, ctx context.Context, js jetstream.JetStream, fs []jetstream.PubAckFuture) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	for _, f := range fs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
}

// pages are the pages measured, against 10,000 stored conversations.
var perfPages = []string{
	"/console/",
	"/console/conversations/c-05000",
	"/console/turns/t-05000?c=c-05000",
	"/console/turns/t-09999", // found from the stream
	"/console/diff?a=t-00001&ca=c-00001&b=t-09998&cb=c-09998",
	"/console/dead",
	"/console/search?q=t-04242",
}

// TestPagesFastWith10000Conversations: every page renders fast (median of
// 7) with 10,000 conversations (40,000 events) stored: no page reads the
// whole stream. The figures are logged (go test -v). The budget is 100 ms
// under `make test-console` (APTIX_CONSOLE_PERF_BUDGET=100ms, the package
// alone); the default 400 ms still fails a page that scans the stream
// (reading 40,000 events takes seconds) without failing `make test`, where
// every package's tests share the cores.
func TestPagesFastWith10000Conversations(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 40,000 events")
	}
	e := newEnv(t)
	e.seedMany(10000)
	e.dead("c-00007", "t-00007", "gave up")
	c := e.server()
	budget := 400 * time.Millisecond
	if v := os.Getenv("APTIX_CONSOLE_PERF_BUDGET"); v != "" {
		budget, _ = time.ParseDuration(v)
	}
	for _, p := range perfPages {
		var took []time.Duration
		for range 7 {
			start := time.Now()
			r := c.get(p)
			took = append(took, time.Since(start))
			if r.status != 200 && r.status != 303 {
				t.Fatalf("%s: %d\n%.500s", p, r.status, r.body)
			}
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("%-60s median %6.1f ms  max %6.1f ms", p, ms(took[3]), ms(took[6]))
		if took[3] > budget {
			t.Errorf("%s: median %s, over the %s budget", p, took[3], budget)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkOverview10000 measures the overview with 10,000 conversations.
func BenchmarkOverview10000(b *testing.B) {
	e := newEnv(b)
	e.seedMany(10000)
	c := e.server()
	b.ResetTimer()
	for b.Loop() {
		if r := c.get("/console/"); r.status != 200 {
			b.Fatal(r.status)
		}
	}
}
