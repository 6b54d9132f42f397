package application

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// completed starts a response of who's and completes its turn, as a
// client holding its answer would have it.
func completed(t *testing.T, a *App, who auth.Principal, body string) *responses.Meta {
	t.Helper()
	ctx := context.Background()
	run, e := a.Start(ctx, who, Turn{Request: create(t, body)})
	if e != nil {
		t.Fatal(e)
	}
	defer run.Close()
	complete(t, a, run.Meta, "answer", "up_"+run.Meta.TurnID)
	if _, _, e := a.Outcome(ctx, run); e != nil {
		t.Fatal(e)
	}
	return run.Meta
}

// TestRecordIsNotBeforeTheSubmit: a response whose record is written (a
// continuation: its id does not name its conversation) has it written
// while its turn is submitted, not before: a record write that waits for
// the turn's entry event to be stored still lets the create through (were
// the write before the submit, it would wait for ever, and the create
// fail), and the create returns only once the record is written.
func TestRecordIsNotBeforeTheSubmit(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice := auth.Principal{ID: "alice"}
	first := completed(t, a, alice, `{"model":"sandbox-1","input":"one"}`)

	var sawTurn atomic.Bool
	a.putHook = func(ctx context.Context, m responses.Meta) error {
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			_, err := a.stream.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageRetrieved, m.ConversationID, m.TurnID))
			if err == nil {
				sawTurn.Store(true)
				return a.store.Put(ctx, m)
			}
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return errors.New("the turn was not submitted while its record waited")
	}
	run, e := a.Start(ctx, alice, Turn{Request: create(t, `{"model":"sandbox-1","input":"two","previous_response_id":"`+first.ID+`"}`)})
	if e != nil {
		t.Fatalf("create: %v", e)
	}
	run.Close()
	if !sawTurn.Load() || run.Meta.ConversationID != first.ConversationID || !written(t, a, run.Meta.ID) {
		t.Fatalf("the continuation's record: written after its turn %v, in %s (want %s), written by the answer %v",
			sawTurn.Load(), run.Meta.ConversationID, first.ConversationID, written(t, a, run.Meta.ID))
	}
	if got, e := replica(t, a).Get(ctx, alice, run.Meta.ID); e != nil || got.ID != run.Meta.ID {
		t.Fatalf("get on another replica: %+v %v", got, e)
	}
}

// TestRecordFailsAfterTheSubmit: a record whose write fails after its
// turn was stored is written again, and the create answers as usual; one
// that cannot be written at all cancels the turn (no model call for a
// response nobody can read) and the create fails, its id unknown to every
// replica.
func TestRecordFailsAfterTheSubmit(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice := auth.Principal{ID: "alice"}
	first := completed(t, a, alice, `{"model":"sandbox-1","input":"one","conversation":"support"}`)
	cont := `{"model":"sandbox-1","input":"two","conversation":"support"}`

	var failures atomic.Int32
	a.putHook = func(ctx context.Context, m responses.Meta) error {
		if failures.Add(1) <= 2 {
			return errors.New("store unavailable")
		}
		return a.store.Put(ctx, m)
	}
	run, e := a.Start(ctx, alice, Turn{Request: create(t, cont)})
	if e != nil {
		t.Fatalf("create after two failed record writes: %v", e)
	}
	run.Close()
	if run.Meta.ConversationID != first.ConversationID || derivable(run.Meta) || !written(t, a, run.Meta.ID) {
		t.Fatalf("the named conversation's turn: %+v, written %v", run.Meta, written(t, a, run.Meta.ID))
	}
	if got, e := replica(t, a).Get(ctx, alice, run.Meta.ID); e != nil || got.ID != run.Meta.ID || got.Conversation == nil {
		t.Fatalf("get on another replica: %+v %v", got, e)
	}

	var failed *responses.Meta
	a.putHook = func(_ context.Context, m responses.Meta) error {
		failed = &m
		return errors.New("store unavailable")
	}
	if _, e := a.Start(ctx, alice, Turn{Request: create(t, cont)}); e == nil {
		t.Fatal("a create whose record cannot be written succeeded")
	}
	if failed == nil {
		t.Fatal("no record write was tried")
	}
	_, _, cancelled, err := a.cancels.Reason(ctx, failed.ConversationID, failed.TurnID)
	if err != nil || !cancelled {
		t.Fatalf("the turn of an unrecorded response is not cancelled: %v %v", cancelled, err)
	}
	if _, e := replica(t, a).Get(ctx, alice, failed.ID); e == nil || e.Status != 404 {
		t.Fatalf("get of the unrecorded response: %v, want 404", e)
	}
}

// TestQueuedTurnRecord: a turn that waits in the admission queue (one
// that asks for retrieval) has no event in the history yet; its record is
// read from the queued request, so a background response is found by any
// replica the moment its id is answered, and so is its deadline's.
func TestQueuedTurnRecord(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice := auth.Principal{ID: "alice"}
	run, e := a.Start(ctx, alice, Turn{Background: true,
		Request: create(t, `{"model":"sandbox-1","input":"hello","background":true,"aptix":{"workspaceId":"w1"}}`)})
	if e != nil {
		t.Fatal(e)
	}
	id := run.Meta.ID
	if written(t, a, id) {
		t.Fatal("a background response that starts its conversation had its record written")
	}
	if _, err := a.stream.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageRetrieved, run.Meta.ConversationID, run.Meta.TurnID)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("a turn asking for retrieval is past the queue: %v", err)
	}
	other := replica(t, a)
	got, e := other.Get(ctx, alice, id)
	if e != nil || got.Status != responses.StatusQueued || !got.Background {
		t.Fatalf("get on another replica: %+v %v", got, e)
	}
	if items, e := other.InputItems(ctx, alice, id, Page{}); e != nil || len(items.Data) != 1 {
		t.Fatalf("input items on another replica: %+v %v", items, e)
	}
	if m, err := other.lookupIn(ctx, id, run.Meta.ConversationID, run.Meta.TurnID); err != nil || m == nil || m.Owner != "alice" || !m.Background {
		t.Fatalf("the deadline's lookup: %+v %v", m, err)
	}
	if c, e := other.Cancel(ctx, alice, id); e != nil || c.Status != responses.StatusCancelled {
		t.Fatalf("cancel on another replica: %+v %v", c, e)
	}
}

// TestRecordNamesItsResponse: a record carried by a turn is taken only
// for the response it names: a request whose carried record names
// another response, or none, gives no record, and an id that is not the
// gateway's finds no turn.
func TestRecordNamesItsResponse(t *testing.T) {
	turn := "0190a0b0-0000-7000-8000-000000000001"
	id := "resp_0190a0b0000070008000000000000001"
	if turnOf(id) != turn || turnOf("resp_x") != "" || turnOf("msg_0190a0b0000070008000000000000001") != "" {
		t.Fatalf("turnOf(%s) = %q", id, turnOf(id))
	}
	m := &responses.Meta{ID: id, TurnID: turn, ConversationID: firstConversation(turn), Owner: "alice"}
	var req contracts.AgentExecuteRequest
	if e := carry(&req, m); e != nil {
		t.Fatal(e)
	}
	if got := carried(&req, id, m.ConversationID, turn); got == nil || got.Owner != "alice" {
		t.Fatalf("carried: %+v", got)
	}
	for _, other := range [][3]string{{"resp_other", m.ConversationID, turn}, {id, "c-other", turn}, {id, m.ConversationID, "other"}} {
		if got := carried(&req, other[0], other[1], other[2]); got != nil {
			t.Fatalf("a record carried for %v taken for %v", m, other)
		}
	}
	if got := carried(&contracts.AgentExecuteRequest{}, id, m.ConversationID, turn); got != nil {
		t.Fatalf("a request with no record gave %+v", got)
	}
}

// TestCompletionRecord: the webhook consumer reads a response's record
// from the completion it holds when the response's id names its
// conversation (nothing written), from the bucket otherwise; a turn of a
// conversation its id does not name, with no record written, has none.
func TestCompletionRecord(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice := auth.Principal{ID: "alice"}
	first := completed(t, a, alice, `{"model":"sandbox-1","input":"one","metadata":{"webhook_url":"http://127.0.0.1:1/hook"}}`)
	second := completed(t, a, alice, `{"model":"sandbox-1","input":"two","previous_response_id":"`+first.ID+`"}`)
	completion := func(m *responses.Meta) jetstream.Msg {
		t.Helper()
		c, err := a.js.OrderedConsumer(ctx, contracts.StreamName, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{contracts.Subject(contracts.StageCompleted, m.ConversationID, m.TurnID)}})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	got, err := a.completionRecord(ctx, first.ID, first.ConversationID, first.TurnID, completion(first))
	if err != nil || got == nil || got.Owner != "alice" || responses.Pending(*got, "").Metadata["webhook_url"] == "" {
		t.Fatalf("the first response's record from its completion: %+v %v", got, err)
	}
	if got, err := a.completionRecord(ctx, second.ID, second.ConversationID, second.TurnID, completion(second)); err != nil || got == nil || got.ID != second.ID {
		t.Fatalf("the continuation's written record: %+v %v", got, err)
	}
	if err := a.store.kv.Purge(ctx, respKey(second.ID)); err != nil {
		t.Fatal(err)
	}
	if got, err := a.completionRecord(ctx, second.ID, second.ConversationID, second.TurnID, completion(second)); err != nil || got != nil {
		t.Fatalf("a continuation with no record written: %+v %v, want none", got, err)
	}
}
