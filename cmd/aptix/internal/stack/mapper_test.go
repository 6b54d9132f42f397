package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	mapperstage "github.com/aptix-dev/aptix/services/mapper/stage"
)

// convStore wraps the mapper's conversation store: put, when set, runs
// instead of the write and decides whether it happens.
type convStore struct {
	inner mapperstage.ConversationStore
	put   func(conv string, rec store.Conversation) (write bool, err error)
}

func (s convStore) Put(ctx context.Context, conv string, rec store.Conversation) error {
	write, err := s.put(conv, rec)
	if err != nil || !write {
		return err
	}
	return s.inner.Put(ctx, conv, rec)
}

// usageStore wraps the mapper's usage accounting the same way.
type usageStore struct {
	inner  mapperstage.UsageRecorder
	record func(spend.Record)
}

func (s usageStore) Record(ctx context.Context, rec spend.Record) error {
	s.record(rec)
	return s.inner.Record(ctx, rec)
}

// completedSeq is the stream sequence of the turn's stored completion, 0
// when there is none.
func (e *env) completedSeq(conv, turn string) uint64 {
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		e.t.Error(err)
		return 0
	}
	m, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(contracts.StageCompleted, conv, turn))
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			e.t.Error(err)
		}
		return 0
	}
	return m.Sequence
}

// TestNextTurnBeforeConversationRecord: the mapper writes a conversation's
// record after the completion, so a client that sends its next turn as
// soon as it reads one can reach the envelope before the record exists.
// Here the first turn's record is never written and the second turn's is
// written late, over the third's: each next turn still continues from the
// one before it, with its tools.
func TestNextTurnBeforeConversationRecord(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Bool
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Mapper = func(m *mapperstage.Mapper) {
			m.Conversations = convStore{inner: m.Conversations, put: func(_ string, rec store.Conversation) (bool, error) {
				switch rec.TurnId {
				case "t1":
					return false, nil // lost: never written
				case "t2":
					if !held.Swap(true) {
						<-release // written after t3's record
					}
				}
				return true, nil
			}}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	convs, err := store.OpenConversations(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	send := func(turn string, tools string) contracts.Turn {
		return e.turn(contracts.AgentExecuteRequest{ConversationId: "c-next", TurnId: turn, Instruction: "go on " + turn,
			ToolsJson: tools, RagScope: contracts.RagScopeNone})
	}
	r1 := send("t1", ddrTools).Response
	r2 := send("t2", "").Response
	sent2 := sentBody(t, e.sb.LastRequest())
	if sent2["previous_response_id"] != r1.ResponseContinuationId {
		t.Fatalf("turn 2 previous_response_id %v, want turn 1's %s", sent2["previous_response_id"], r1.ResponseContinuationId)
	}
	if sent2["tools"] == nil {
		t.Fatal("turn 2 did not re-send turn 1's tools")
	}
	r3 := send("t3", "").Response
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != r2.ResponseContinuationId {
		t.Fatalf("turn 3 previous_response_id %v, want turn 2's %s", sent["previous_response_id"], r2.ResponseContinuationId)
	}
	// t3's record is written; t2's, held until now, lands over it.
	recorded := func(turn string) {
		t.Helper()
		for {
			rec, err := convs.Record(ctx, "c-next")
			if err != nil {
				t.Fatal(err)
			}
			if rec != nil && rec.TurnId == turn {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("record %+v, want turn %s's", rec, turn)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	recorded("t3")
	close(release)
	recorded("t2")
	if rec, err := convs.Get(ctx, "c-next"); err != nil || rec.TurnId != "t3" || rec.ResponseId != r3.ResponseContinuationId || len(rec.Tools) == 0 {
		t.Fatalf("Get %+v (%v), want turn 3's", rec, err)
	}
	send("t4", "")
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != r3.ResponseContinuationId {
		t.Fatalf("turn 4 previous_response_id %v, want turn 3's %s", sent["previous_response_id"], r3.ResponseContinuationId)
	}
	e.settled()
}

// TestCompletionBeforeRecords: the mapper stores the completion before it
// records the turn's usage and the conversation's record, so the client
// does not wait for either.
func TestCompletionBeforeRecords(t *testing.T) {
	var e *env
	var puts, records atomic.Int32
	e = newEnv(t, sandbox.Options{}, priced(100), func(c *Config) {
		c.Mapper = func(m *mapperstage.Mapper) {
			m.Conversations = convStore{inner: m.Conversations, put: func(conv string, rec store.Conversation) (bool, error) {
				puts.Add(1)
				if e.completedSeq(conv, rec.TurnId) == 0 {
					t.Errorf("conversation record of %s written before its completion", rec.TurnId)
				}
				return true, nil
			}}
			m.Usage = usageStore{inner: m.Usage, record: func(rec spend.Record) {
				records.Add(1)
				conv, turn, _ := strings.Cut(rec.TurnKey, ".")
				if e.completedSeq(conv, turn) == 0 {
					t.Errorf("usage of %s recorded before its completion", rec.TurnKey)
				}
			}}
		}
	})
	for i := range 3 {
		e.turn(contracts.AgentExecuteRequest{ConversationId: "c-order", TurnId: fmt.Sprintf("t%d", i), Instruction: "x", Principal: "bus:o", RagScope: contracts.RagScopeNone})
	}
	e.settled()
	if puts.Load() != 3 || records.Load() != 3 {
		t.Fatalf("%d conversation writes and %d usage records for 3 turns", puts.Load(), records.Load())
	}
}

// TestMapperRedeliveredAfterCompletion: the mapper stores the completion,
// records the usage, and its conversation write fails after the stream's
// de-duplication window has passed. The redelivery finds the stored
// completion: no second completion is stored, the answer is not mapped
// again, and the turn's usage is counted once.
func TestMapperRedeliveredAfterCompletion(t *testing.T) {
	var puts atomic.Int32
	e := newEnv(t, sandbox.Options{}, priced(100), func(c *Config) {
		c.Stream = layout.StreamConfig{Duplicates: 100 * time.Millisecond}
		c.Mapper = func(m *mapperstage.Mapper) {
			m.Conversations = convStore{inner: m.Conversations, put: func(string, store.Conversation) (bool, error) {
				if puts.Add(1) == 1 {
					time.Sleep(300 * time.Millisecond) // past the de-duplication window
					return false, errors.New("conversation store unavailable")
				}
				return true, nil
			}}
		}
	})
	turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "c-redo", TurnId: "t1", Instruction: "once", Principal: "bus:r", RagScope: contracts.RagScopeNone})
	e.settled()
	if puts.Load() != 2 {
		t.Fatalf("%d conversation writes: want the failed one and the redelivery's", puts.Load())
	}
	time.Sleep(200 * time.Millisecond) // let any second completion land
	if n := e.count(contracts.Subject(contracts.StageCompleted, "c-redo", "t1")); n != 1 {
		t.Fatalf("%d completions stored, want 1", n)
	}
	rep, err := e.usageOf().Report(context.Background(), spend.Filter{Principal: "bus:r"})
	if err != nil || rep.Turns != 1 || rep.CostNanos != turn.Response.Cost.Nanos() {
		t.Fatalf("totals %+v (%v), want 1 turn at %v", rep.Counts, err, turn.Response.Cost.Total)
	}
	convs, err := store.OpenConversations(context.Background(), e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := convs.Record(context.Background(), "c-redo"); err != nil || rec == nil || rec.ResponseId != turn.Response.ResponseContinuationId {
		t.Fatalf("record %+v (%v), want the stored completion's response id %s", rec, err, turn.Response.ResponseContinuationId)
	}
}

// TestNewConversationReadsNothing: a turn that says it starts its
// conversation is not continued from what is on record (the envelope skips
// both lookups), even when the id was used before; the next turn continues
// from it.
func TestNewConversationReadsNothing(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	send := func(turn string, fresh bool) contracts.Turn {
		return e.turn(contracts.AgentExecuteRequest{ConversationId: "c-fresh", TurnId: turn, Instruction: "go on " + turn,
			NewConversation: fresh, RagScope: contracts.RagScopeNone})
	}
	send("t1", true)
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != nil {
		t.Fatalf("turn 1 previous_response_id %v, want none", sent["previous_response_id"])
	}
	e.settled()
	r2 := send("t2", true).Response
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != nil {
		t.Fatalf("turn 2 said it starts the conversation, yet continued from %v", sent["previous_response_id"])
	}
	e.settled()
	send("t3", false)
	if sent := sentBody(t, e.sb.LastRequest()); sent["previous_response_id"] != r2.ResponseContinuationId {
		t.Fatalf("turn 3 previous_response_id %v, want turn 2's %s", sent["previous_response_id"], r2.ResponseContinuationId)
	}
	e.settled()
}
