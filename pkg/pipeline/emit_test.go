package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	// Redelivered after the stream's de-duplication window: a second
	// publish of the output would be stored.
	sc := SubscriberConfig{AckWait: 5 * time.Second, MaxDeliver: 4, Backoff: []time.Duration{400 * time.Millisecond}}
	go func() {
		done <- Run(ctx, nc, Stage{Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded, Handle: h}, Options{Stream: shortDedup, Subscriber: sc, Logger: quiet, Ready: ready})
	}()
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
