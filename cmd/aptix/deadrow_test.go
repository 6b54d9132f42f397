package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// failPoints are the places a turn of failChain can be made to fail: each
// stage, and the LLM caller's second call (after the tool round).
var failPoints = []string{"retriever", "envelope", "llmcaller", "toolrunner", "llmcaller-round", "mapper"}

// failChain is the five stages with stand-in handlers on an embedded NATS:
// every turn makes one server-side tool round (llmcaller → toolrunner →
// llmcaller), and a turn whose instruction is "fail:<point>" fails there on
// every delivery while broken is set.
type failChain struct {
	js     jetstream.JetStream
	broken atomic.Bool
}

func newFailChain(t *testing.T) *failChain {
	t.Helper()
	nc, js := natstest.JetStream(t)
	c := &failChain{js: js}
	c.broken.Store(true)
	fails := func(turn *contracts.Turn, point string) error {
		if c.broken.Load() && turn.Request.Instruction == "fail:"+point {
			return errors.New(point + " is down")
		}
		return nil
	}
	stages := []pipeline.Stage{
		{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved, Handle: func(_ context.Context, t *contracts.Turn) error {
			t.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{}}
			return fails(t, "retriever")
		}},
		{Name: "envelope", In: contracts.StageRetrieved, Out: contracts.StageEnveloped, Handle: func(_ context.Context, t *contracts.Turn) error {
			t.Envelope = &contracts.Envelope{Backend: "fake", Model: "fake-1"}
			return fails(t, "envelope")
		}},
		{Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded, Handle: func(_ context.Context, t *contracts.Turn) error {
			if t.Tools == nil {
				t.Tools = &contracts.ToolLoop{MaxDepth: 2, Step: 1}
				return fails(t, "llmcaller")
			}
			return fails(t, "llmcaller-round")
		}, Route: func(t *contracts.Turn) string {
			if t.Tools.Round == 0 {
				return contracts.StageToolRound
			}
			return contracts.StageResponded
		}},
		{Name: "toolrunner", In: contracts.StageToolRound, Out: contracts.StageEnveloped, Handle: func(_ context.Context, t *contracts.Turn) error {
			if err := fails(t, "toolrunner"); err != nil {
				return err
			}
			t.Tools.Round, t.Tools.Step = 1, 2
			return nil
		}},
		{Name: "mapper", In: contracts.StageResponded, Out: contracts.StageCompleted, Handle: func(_ context.Context, t *contracts.Turn) error {
			if err := fails(t, "mapper"); err != nil {
				return err
			}
			t.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, ConversationId: t.ConversationId, TurnId: t.TurnId, Text: "done"}
			return nil
		}},
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, st := range stages {
		ready := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = pipeline.Run(ctx, nc, st, pipeline.Options{Logger: quiet, Ready: ready, Subscriber: pipeline.SubscriberConfig{
				AckWait: 2 * time.Second, MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DrainTimeout: 2 * time.Second}})
		}()
		select {
		case <-ready:
		case <-time.After(20 * time.Second):
			t.Fatalf("stage %s not ready", st.Name)
		}
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// TestDeadLettersInARow: many turns dead-lettered one after another, at
// every stage and at the tool round, are each stored as a dead letter and
// each answered with an error completion; `dead retry --all` then re-drives
// every one of them to a good answer. A dead letter used to copy the
// consumed event's publish expectation (the retriever's "first event on this
// subject"), so the envelope's second dead letter was refused, its turn got
// no answer, and no retry of an envelope dead letter could be published.
func TestDeadLettersInARow(t *testing.T) {
	for _, n := range []int{2, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newFailChain(t)
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			// n per fail point for the small run (two in a row at each), n in all for the large one.
			total := n * len(failPoints)
			if n > len(failPoints) {
				total = n
			}
			type sent struct{ conv, turn, point string }
			var turns []sent
			for i := range total {
				point := failPoints[i%len(failPoints)]
				s := sent{conv: fmt.Sprintf("c%d", i%7), turn: fmt.Sprintf("t%d", i), point: point}
				turns = append(turns, s)
				if err := client.Submit(ctx, c.js, contracts.AgentExecuteRequest{ConversationId: s.conv, TurnId: s.turn, Instruction: "fail:" + point}); err != nil {
					t.Fatal(err)
				}
			}
			stageOf := func(point string) string { return strings.TrimSuffix(point, "-round") }
			for _, s := range turns {
				done, err := client.Await(ctx, c.js, s.conv, s.turn)
				if err != nil {
					t.Fatalf("turn %s (fail at %s): no completion: %v", s.turn, s.point, err)
				}
				if done.Response == nil || done.Response.Kind != contracts.KindError || done.Failure == nil || done.Failure.Stage != stageOf(s.point) ||
					!strings.Contains(done.Response.ErrorMessage, s.point+" is down") {
					t.Fatalf("turn %s (fail at %s): %+v %+v", s.turn, s.point, done.Response, done.Failure)
				}
			}
			letters, err := deadLetters(ctx, c.js, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(letters) != total {
				t.Fatalf("%d dead letters stored, want %d", len(letters), total)
			}
			perStage := map[string]int{}
			for _, d := range letters {
				perStage[d.FromStage]++
				for k := range d.Header {
					if strings.HasPrefix(k, "Nats-Expected") {
						t.Fatalf("dead letter %d kept the directive %s: %v", d.Seq, k, d.Header)
					}
				}
			}
			for _, point := range failPoints {
				if perStage[stageOf(point)] == 0 {
					t.Fatalf("no dead letter from %s: %v", stageOf(point), perStage)
				}
			}

			c.broken.Store(false)
			var out bytes.Buffer
			if err := retryDead(ctx, c.js, letters, &out); err != nil {
				t.Fatalf("dead retry --all: %v\n%s", err, out.String())
			}
			for _, s := range turns {
				for {
					done, err := client.Await(ctx, c.js, s.conv, s.turn)
					if err != nil {
						t.Fatalf("turn %s (fail at %s) after the retry: %v", s.turn, s.point, err)
					}
					if done.Response.Kind == contracts.KindOK {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if left, err := deadLetters(ctx, c.js, ""); err != nil || len(left) != 0 {
				t.Fatalf("dead letters after the retry: %d %v", len(left), err)
			}
		})
	}
}
