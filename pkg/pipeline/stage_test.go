package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runStage runs a test stage (requested → retrieved) until the test ends.
func runStage(t *testing.T, nc *nats.Conn, h Handler, sc SubscriberConfig) {
	t.Helper()
	runStageOf(t, nc, Stage{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved, Handle: h}, Options{Subscriber: sc})
}

// runStageOf runs st with o (quiet unless o has a logger) until the test ends.
func runStageOf(t *testing.T, nc *nats.Conn, st Stage, o Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	if o.Logger == nil {
		o.Logger = quiet
	}
	o.Ready = ready
	go func() { done <- Run(ctx, nc, st, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("stage stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("stage not ready")
	}
}

func submit(t *testing.T, js jetstream.JetStream, turn string) {
	t.Helper()
	req := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: turn, Instruction: "x"}
	if err := client.Submit(context.Background(), js, req); err != nil {
		t.Fatal(err)
	}
}

// next reads the first event on subject from the stream (waiting up to 10 s).
func next(t *testing.T, js jetstream.JetStream, subject string) jetstream.Msg {
	t.Helper()
	c, err := js.OrderedConsumer(context.Background(), contracts.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("no event on %s: %v", subject, err)
	}
	return m
}

func TestRetryWithGrowingDelayThenSuccess(t *testing.T) {
	nc, js := natstest.JetStream(t)
	var mu sync.Mutex
	var attempts []time.Time
	runStage(t, nc, func(ctx context.Context, turn *contracts.Turn) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, time.Now())
		if len(attempts) < 3 {
			return errors.New("index not ready")
		}
		turn.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{}}
		return nil
	}, SubscriberConfig{MaxDeliver: 5, Backoff: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}})
	submit(t, js, "t1")
	m := next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "t1"))
	var out contracts.Turn
	if err := json.Unmarshal(m.Data(), &out); err != nil || out.Retrieval == nil {
		t.Fatalf("%v %+v", err, out)
	}
	if got := m.Headers().Get(contracts.HeaderMsgID); got != "c1.t1.retrieved" {
		t.Fatalf("Nats-Msg-Id %q", got)
	}
	if m.Headers().Get(contracts.HeaderCEType) != "dev.aptix.turn.retrieved.v1" || m.Headers().Get(contracts.HeaderTraceparent) == "" {
		t.Fatalf("headers %v", m.Headers())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 3 {
		t.Fatalf("%d attempts", len(attempts))
	}
	// NakWithDelay, not a tight loop: the gaps follow the backoff.
	if d := attempts[1].Sub(attempts[0]); d < 180*time.Millisecond {
		t.Fatalf("first retry after %s, want ≥ 200ms", d)
	}
	if d := attempts[2].Sub(attempts[1]); d < 380*time.Millisecond {
		t.Fatalf("second retry after %s, want ≥ 400ms", d)
	}
}

func TestGiveUpDeadLettersAndAnswers(t *testing.T) {
	for name, h := range map[string]Handler{
		"error": func(context.Context, *contracts.Turn) error { return errors.New("disk on fire") },
		"panic": func(context.Context, *contracts.Turn) error { panic("nil map") },
	} {
		t.Run(name, func(t *testing.T) {
			nc, js := natstest.JetStream(t)
			var calls atomic.Int32
			runStage(t, nc, func(ctx context.Context, turn *contracts.Turn) error { calls.Add(1); return h(ctx, turn) },
				SubscriberConfig{MaxDeliver: 3, Backoff: []time.Duration{20 * time.Millisecond}})
			submit(t, js, "t1")
			done := next(t, js, contracts.Subject(contracts.StageCompleted, "c1", "t1"))
			var out contracts.Turn
			if err := json.Unmarshal(done.Data(), &out); err != nil {
				t.Fatal(err)
			}
			if out.Response == nil || out.Response.Kind != contracts.KindError || out.Response.ErrorCode != CodeStageFailed || out.Failure.Stage != "retriever" {
				t.Fatalf("%+v", out.Response)
			}
			dead := next(t, js, contracts.DeadSubject("retriever"))
			if dead.Headers().Get(contracts.HeaderDeadDeliveries) != "3" || dead.Headers().Get(contracts.HeaderDeadReason) == "" ||
				dead.Headers().Get(contracts.HeaderDeadSubject) != "aptix.requested.c1.t1" {
				t.Fatalf("dead letter headers %v", dead.Headers())
			}
			if calls.Load() != 3 {
				t.Fatalf("%d calls, want MaxDeliver=3", calls.Load())
			}
		})
	}
}

// TestInProgressKeepsLongHandlers: a handler running three AckWaits is not
// redelivered, because the subscriber keeps the event in progress.
func TestInProgressKeepsLongHandlers(t *testing.T) {
	nc, js := natstest.JetStream(t)
	var calls atomic.Int32
	runStage(t, nc, func(ctx context.Context, turn *contracts.Turn) error {
		calls.Add(1)
		time.Sleep(3 * time.Second)
		return nil
	}, SubscriberConfig{AckWait: time.Second, MaxDeliver: 5})
	submit(t, js, "slow")
	next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "slow"))
	time.Sleep(1500 * time.Millisecond)
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times: the event was redelivered while in progress", calls.Load())
	}
}

// TestDrainFinishesInFlight: cancelling a stage lets the running handler
// finish and publish before Run returns.
func TestDrainFinishesInFlight(t *testing.T) {
	nc, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, nc, Stage{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved,
			Handle: func(context.Context, *contracts.Turn) error {
				close(started)
				time.Sleep(500 * time.Millisecond)
				return nil
			}},
			Options{Logger: quiet, Ready: ready})
	}()
	<-ready
	submit(t, js, "t1")
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "t1"))
	c, _ := js.Consumer(context.Background(), contracts.QueueStreamName, layout.Durable("retriever"))
	info, _ := c.Info(context.Background())
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("after drain: %d unacked, %d pending", info.NumAckPending, info.NumPending)
	}
}

func TestMicroStatus(t *testing.T) {
	nc, js := natstest.JetStream(t)
	runStage(t, nc, func(context.Context, *contracts.Turn) error { return nil }, SubscriberConfig{})
	submit(t, js, "t1")
	next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "t1"))
	// The count moves after the output is published and the input acked,
	// so a moment after the output can be read.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		resp, err := nc.Request("aptix.svc.retriever.status", nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var counts map[string]int64
		if err := json.Unmarshal(resp.Data, &counts); err != nil {
			t.Fatalf("%s %v", resp.Data, err)
		}
		if counts["processed"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s", resp.Data)
		}
	}
	// Discoverable like any micro service: `nats micro ls` sends this ping.
	info, err := nc.Request("$SRV.INFO.aptix-retriever", nil, 2*time.Second)
	if err != nil || !json.Valid(info.Data) {
		t.Fatalf("micro info: %v", err)
	}
	// `nats micro stats aptix-retriever` counts the events the stage handled
	// (it used to count only calls of the status endpoint).
	submit(t, js, "t2")
	next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "t2"))
	var stats micro.Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		resp, err := nc.Request("$SRV.STATS.aptix-retriever", nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(resp.Data, &stats); err != nil || len(stats.Endpoints) != 1 {
			t.Fatalf("%s %v", resp.Data, err)
		}
		if stats.Endpoints[0].NumRequests == 2 || time.Now().After(deadline) {
			break
		}
	}
	if ep := stats.Endpoints[0]; ep.Name != "process" || ep.NumRequests != 2 || ep.NumErrors != 0 || ep.Subject != "aptix.requested.>" {
		t.Fatalf("stats endpoint %+v", ep)
	}
	if stats.Type != micro.StatsResponseType || stats.Name != "aptix-retriever" {
		t.Fatalf("stats %+v", stats)
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	_, js := natstest.JetStream(t)
	for i := range 2 {
		if err := Provision(context.Background(), js, layout.StreamConfig{}, SubscriberConfig{}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	for _, st := range layout.Stages {
		c, err := js.Consumer(context.Background(), contracts.StreamOf(st.In), layout.Durable(st.Name))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CachedInfo().Config.FilterSubject; got != contracts.StageFilter(st.In) {
			t.Fatalf("%s filters %s", st.Name, got)
		}
	}
	s, _ := js.Stream(context.Background(), contracts.StreamName)
	if subs := s.CachedInfo().Config.Subjects; len(subs) != 6 || subs[0] != "aptix.retrieved.>" || subs[4] != "aptix.toolround.>" {
		t.Fatalf("stream subjects %v", subs)
	}
	q, _ := js.Stream(context.Background(), contracts.QueueStreamName)
	if cfg := q.CachedInfo().Config; len(cfg.Subjects) != 2 || cfg.Subjects[0] != "aptix.requested.>" || cfg.Subjects[1] != contracts.QueueKeeperSubject || cfg.Retention != jetstream.WorkQueuePolicy || cfg.Discard != jetstream.DiscardNew {
		t.Fatalf("queue %+v", cfg)
	}
}

// TestStageCounters: a stage's own counters (the LLM caller's re-attached
// and repeated calls) are reported with the runtime's, on the status
// endpoint and in `nats micro stats` data.
func TestStageCounters(t *testing.T) {
	nc, _ := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, nc, Stage{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved,
			Handle:   func(context.Context, *contracts.Turn) error { return nil },
			Counters: func() map[string]int64 { return map[string]int64{"calls_reattached": 7} }},
			Options{Logger: quiet, Ready: ready})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-ready
	resp, err := nc.Request("aptix.svc.retriever.status", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var counts map[string]int64
	if err := json.Unmarshal(resp.Data, &counts); err != nil || counts["calls_reattached"] != 7 {
		t.Fatalf("status %s %v", resp.Data, err)
	}
	resp, err = nc.Request("$SRV.STATS.aptix-retriever", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(resp.Data, &stats); err != nil || len(stats.Endpoints) != 1 ||
		!strings.Contains(string(stats.Endpoints[0].Data), `"calls_reattached":7`) {
		t.Fatalf("stats %s %v", resp.Data, err)
	}
}

// TestReusedTurnIDWithClaimedEvent: the first stage's event is too large to
// publish inline (claim check), so a reused turn id is looked up before the
// new request's event is stored: the new request is answered turn_id_reused
// and the first request's recorded event is left as it was.
func TestReusedTurnIDWithClaimedEvent(t *testing.T) {
	nc, js := natstest.JetStream(t)
	runStage(t, nc, func(ctx context.Context, turn *contracts.Turn) error {
		turn.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{{Content: strings.Repeat("x", 1<<20)}}}
		return nil
	}, SubscriberConfig{AckWait: 5 * time.Second, MaxDeliver: 3})
	ctx := context.Background()
	first := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "big", Instruction: "first"}
	if err := client.Submit(ctx, js, first); err != nil {
		t.Fatal(err)
	}
	if m := next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", "big")); m.Headers().Get(contracts.HeaderClaim) == "" {
		t.Fatal("the retrieved event was not claim-checked: the test needs it to be")
	}
	second := first
	second.Instruction = "second"
	data, _ := json.Marshal(second)
	if _, err := js.Publish(ctx, contracts.Subject(contracts.StageRequested, "c1", "big"), data); err != nil {
		t.Fatal(err)
	}
	m := next(t, js, contracts.Subject(contracts.StageCompleted, "c1", "big"))
	var done contracts.Turn
	full, err := claim.EventData(ctx, js, m.Headers(), m.Data())
	if err == nil {
		err = json.Unmarshal(full, &done)
	}
	if err != nil || done.Response == nil || done.Response.ErrorCode != contracts.CodeTurnIDReused {
		t.Fatalf("second request: %v %+v", err, done.Response)
	}
	prev, err := turnreuse.RecordedRequest(ctx, js, "c1", "big")
	if err != nil || prev == nil || prev.Instruction != "first" {
		t.Fatalf("the first request's record: %+v %v", prev, err)
	}
}
