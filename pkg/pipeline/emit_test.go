package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

var shortDedup = layout.StreamConfig{Duplicates: 100 * time.Millisecond}

// runMid runs a test stage that does not admit turns (enveloped → responded).
func runMid(t *testing.T, nc *nats.Conn, h Handler) {
	t.Helper()
	// Redelivered after the stream's de-duplication window: a second
	// publish of the output would be stored.
	sc := SubscriberConfig{AckWait: 5 * time.Second, MaxDeliver: 4, Backoff: []time.Duration{400 * time.Millisecond}}
	runStageOf(t, nc, Stage{Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded, Handle: h}, Options{Stream: shortDedup, Subscriber: sc})
}

func publishEnveloped(t *testing.T, nc *nats.Conn, conv, turnID string) {
	t.Helper()
	js, _ := jetstream.New(nc)
	if _, err := layout.EnsureStream(context.Background(), js, shortDedup); err != nil {
		t.Fatal(err)
	}
	tn := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: conv, TurnId: turnID, Instruction: "x"})
	tn.Envelope = &contracts.Envelope{Model: "m"}
	if err := publishEventID(context.Background(), NewPublisher(js), "test", contracts.StageEnveloped, conv, turnID, contracts.EventMsgID(&tn, contracts.StageEnveloped), mustMarshal(t, &tn)); err != nil {
		t.Fatal(err)
	}
}

func mustMarshal(t *testing.T, tn *contracts.Turn) []byte {
	t.Helper()
	b, err := turncodec.Marshal(tn)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEmitStoresOnceAcrossRedelivery: a handler that stores its output
// (Emit) and then fails is redelivered; it finds its output (Output),
// marks it stored (Emitted), and the output is stored exactly once, with
// the work done once.
func TestEmitStoresOnceAcrossRedelivery(t *testing.T) {
	nc, js := natstest.JetStream(t)
	var work, deliveries atomic.Int32
	runMid(t, nc, func(ctx context.Context, tn *contracts.Turn) error {
		deliveries.Add(1)
		if Delivered(ctx) > 1 {
			prev, seq, err := Output(ctx, js, tn.ConversationId, tn.TurnId, contracts.StageResponded)
			if err != nil {
				return err
			}
			if prev != nil {
				if seq == 0 || prev.Warnings[0] != "paid" {
					t.Errorf("found %+v at %d", prev.Warnings, seq)
				}
				*tn = *prev
				return Emitted(ctx)
			}
		}
		work.Add(1)
		tn.Warnings = append(tn.Warnings, "paid")
		if err := Emit(ctx, tn); err != nil {
			return err
		}
		tn.Warnings = append(tn.Warnings, "changed after emit: never stored")
		return errors.New("bookkeeping after the output failed")
	})
	publishEnveloped(t, nc, "c1", "t1")
	m := next(t, js, contracts.Subject(contracts.StageResponded, "c1", "t1"))
	var got contracts.Turn
	if err := turncodec.Unmarshal(m.Data(), &got); err != nil || len(got.Warnings) != 1 {
		t.Fatalf("stored %+v (%v)", got.Warnings, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for deliveries.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if deliveries.Load() != 2 || work.Load() != 1 {
		t.Fatalf("%d deliveries, work done %d times; want 2 and 1", deliveries.Load(), work.Load())
	}
	s, _ := js.Stream(context.Background(), contracts.StreamName)
	info, _ := s.Info(context.Background(), jetstream.WithSubjectFilter(contracts.Subject(contracts.StageResponded, "c1", "t1")))
	if n := info.State.Subjects[contracts.Subject(contracts.StageResponded, "c1", "t1")]; n != 1 {
		t.Fatalf("%d responded events stored, want 1", n)
	}
	if _, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageCompleted, "c1", "t1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("an error completion was published after the output was stored: %v", err)
	}
}

// TestEmitOutsideAHandler: Emit needs the runtime that called the handler.
func TestEmitOutsideAHandler(t *testing.T) {
	tn := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t"})
	if err := Emit(context.Background(), &tn); err == nil {
		t.Fatal("Emit outside a handler succeeded")
	}
}

// TestOutputSkipsOtherRuns: a turn id sent again with another request is
// answered turn_id_reused on the turn's own completed subject, under its own
// Nats-Msg-Id, and a retried dead letter's events carry their redrive mark.
// Neither is the output of the run being handled: Output returns the
// newest event of this run beneath them, not the other run's event or none
// (a mapper redelivered after a reused completion was stored would take it
// for its own answer and never store the turn's completion).
func TestOutputSkipsOtherRuns(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(js)
	own := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "x"})
	own.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, ConversationId: "c1", TurnId: "t1", ResponseContinuationId: "resp_own"}
	if err := publishEventID(ctx, pub, "test", contracts.StageCompleted, "c1", "t1", contracts.EventMsgID(&own, contracts.StageCompleted), mustMarshal(t, &own)); err != nil {
		t.Fatal(err)
	}
	other := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "another request"}
	reused := contracts.NewTurn(other)
	reused.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindError, ConversationId: "c1", TurnId: "t1"}
	if err := publishEventID(ctx, pub, "test", contracts.StageCompleted, "c1", "t1", reuseMsgID("c1", "t1", other), mustMarshal(t, &reused)); err != nil {
		t.Fatal(err)
	}
	got, seq, err := Output(ctx, js, "c1", "t1", contracts.StageCompleted)
	if err != nil || got == nil || got.Response == nil || got.Response.ResponseContinuationId != "resp_own" || seq == 0 {
		t.Fatalf("Output after a turn_id_reused completion: %+v at %d (%v); want the turn's own completion", got, seq, err)
	}

	// A retried dead letter's completion, then (in the original run) a
	// lookup: the redrive's is not the original's, and the reverse.
	redriven := withCarried(ctx, message.Metadata{contracts.HeaderRedrive: "42"})
	retry := own
	retry.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, ConversationId: "c1", TurnId: "t1", ResponseContinuationId: "resp_retry"}
	if err := publishEventID(redriven, pub, "test", contracts.StageCompleted, "c1", "t1", contracts.EventMsgID(&retry, contracts.StageCompleted), mustMarshal(t, &retry)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := Output(ctx, js, "c1", "t1", contracts.StageCompleted); err != nil || got == nil || got.Response.ResponseContinuationId != "resp_own" {
		t.Fatalf("original run's Output after a redrive's completion: %+v (%v)", got, err)
	}
	if got, _, err := Output(redriven, js, "c1", "t1", contracts.StageCompleted); err != nil || got == nil || got.Response.ResponseContinuationId != "resp_retry" {
		t.Fatalf("redrive's Output: %+v (%v)", got, err)
	}
	if got, _, err := Output(withCarried(ctx, message.Metadata{contracts.HeaderRedrive: "43"}), js, "c1", "t1", contracts.StageCompleted); err != nil || got != nil {
		t.Fatalf("another redrive's Output: %+v (%v), want none", got, err)
	}
}

// TestOutputIsTheStagesOwn: another stage's event on the same subjects
// (the envelope's toolround event, stored again by a redelivered envelope
// past the de-duplication window, after the LLM caller's result) is not the
// handling stage's output.
func TestOutputIsTheStagesOwn(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(js)
	own := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "x"})
	own.LLM = &contracts.LLMResult{Backend: "b", Status: 200}
	if err := publishEventID(ctx, pub, "aptix/llmcaller", contracts.StageToolRound, "c1", "t1", "c1.t1.toolround.own", mustMarshal(t, &own)); err != nil {
		t.Fatal(err)
	}
	asks := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "x"})
	if err := publishEventID(ctx, pub, "aptix/envelope", contracts.StageToolRound, "c1", "t1", "c1.t1.toolround.again", mustMarshal(t, &asks)); err != nil {
		t.Fatal(err)
	}
	handling, _ := withEmit(ctx, &runner{st: Stage{Name: "llmcaller"}})
	got, _, err := Output(handling, js, "c1", "t1", contracts.StageResponded, contracts.StageToolRound)
	if err != nil || got == nil || got.LLM == nil {
		t.Fatalf("Output in the LLM caller: %+v (%v), want its own result, not the envelope's newer event", got, err)
	}
}

// TestEventTooLargeFailsAtOnce: an output event above
// APTIX_MAX_EVENT_BYTES is not stored (nor put in the claim store) and its
// turn fails at once with event_too_large, whether the handler stores it
// (Emit, as the LLM caller does) or the runtime publishes it: the handler
// is not run again (for the LLM caller a redelivery would call the model
// again), and nothing is dead-lettered.
func TestEventTooLargeFailsAtOnce(t *testing.T) {
	t.Setenv(layout.EnvMaxEventBytes, "2000000")
	for _, emit := range []bool{true, false} {
		t.Run(map[bool]string{true: "emit", false: "runtime"}[emit], func(t *testing.T) {
			nc, js := natstest.JetStream(t)
			var deliveries atomic.Int32
			runMid(t, nc, func(ctx context.Context, tn *contracts.Turn) error {
				deliveries.Add(1)
				tn.LLM = &contracts.LLMResult{Status: 200, Body: `"` + strings.Repeat("x", 3<<20) + `"`}
				if emit {
					return Emit(ctx, tn)
				}
				return nil
			})
			publishEnveloped(t, nc, "c1", "t1")
			m := next(t, js, contracts.Subject(contracts.StageCompleted, "c1", "t1"))
			var got contracts.Turn
			if err := turncodec.Unmarshal(m.Data(), &got); err != nil || got.Failure == nil || got.Failure.Code != CodeEventTooLarge {
				t.Fatalf("completion %+v (%v)", got.Failure, err)
			}
			time.Sleep(700 * time.Millisecond) // past the 400 ms redelivery backoff
			if n := deliveries.Load(); n != 1 {
				t.Fatalf("handled %d times", n)
			}
			s, _ := js.Stream(context.Background(), contracts.StreamName)
			if _, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageResponded, "c1", "t1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Fatalf("the responded event was stored: %v", err)
			}
			if _, err := s.GetLastMsgForSubject(context.Background(), contracts.DeadSubject("llmcaller")); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Fatalf("dead-lettered: %v", err)
			}
			if obs, err := js.ObjectStore(context.Background(), contracts.ClaimBucket); err == nil {
				if list, err := obs.List(context.Background()); err == nil && len(list) > 0 {
					t.Fatalf("%d objects in the claim store", len(list))
				}
			}
		})
	}
}
