package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

func TestCompletionsDispatchByTurn(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	complete := func(turn, msgID string) {
		t.Helper()
		data, _ := json.Marshal(contracts.Turn{ConversationId: "c", TurnId: turn, Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: "answer " + turn}})
		m := &nats.Msg{Subject: contracts.Subject(contracts.StageCompleted, "c", turn), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	complete("old", "old.completed") // before the watch: not delivered
	comp, err := client.WatchCompletions(ctx, js, "*")
	if err != nil {
		t.Fatal(err)
	}
	defer comp.Stop()

	complete("early", "early.completed") // arrives before anyone waits
	got := make(chan contracts.Turn, 1)
	go func() {
		tr, err := comp.Wait(ctx, "c", "late")
		if err != nil {
			t.Error(err)
		}
		got <- tr
	}()
	time.Sleep(50 * time.Millisecond) // let Wait register first
	complete("late", "late.completed")
	if tr := <-got; tr.Response == nil || tr.Response.Text != "answer late" {
		t.Fatalf("late: %+v", tr)
	}
	tr, err := comp.Wait(ctx, "c", "early")
	if err != nil || tr.Response.Text != "answer early" {
		t.Fatalf("early: %+v, %v", tr, err)
	}
	complete("late", "late.completed.again") // a duplicate completion (different msg id)
	deadline := time.Now().Add(5 * time.Second)
	for {
		turns, dups, bad := comp.Counts()
		if turns == 2 && dups == 1 && bad == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts: turns %d dups %d bad %d, want 2 1 0", turns, dups, bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, err := comp.Wait(short, "c", "old"); err == nil {
		t.Fatal("a completion from before the watch was delivered")
	}
}

// TestCompletionsForgetUnclaimed: a watcher of every conversation keeps a
// completion nobody waits for only for a while, so its memory stays bounded.
func TestCompletionsForgetUnclaimed(t *testing.T) {
	ctx := context.Background()
	js, comp := watchAll(t, ctx)
	comp.SetKeep(200 * time.Millisecond)
	publish := func(turn string) {
		data, _ := json.Marshal(contracts.Turn{Version: 1, ConversationId: "c", TurnId: turn, Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK}})
		if _, err := js.Publish(ctx, contracts.Subject(contracts.StageCompleted, "c", turn), data); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		publish(fmt.Sprintf("old%d", i))
	}
	deadline := time.Now().Add(5 * time.Second)
	for comp.Pending() != 50 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	publish("new")
	for comp.Pending() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := comp.Pending(); n != 1 {
		t.Fatalf("%d unclaimed completions kept, want only the new one", n)
	}
	if got, err := comp.Wait(ctx, "c", "new"); err != nil || got.TurnId != "new" {
		t.Fatalf("%+v %v", got, err)
	}
}

// TestCompletionsDecodeOnlyWhenClaimed: a completion is decoded by the
// caller that waits for it, so one nobody claims costs no decode (every
// gateway replica sees every completion); an undecodable one is an error to
// its waiter and counted then.
func TestCompletionsDecodeOnlyWhenClaimed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, comp := watchAll(t, ctx)
	publish := func(turn string, data []byte) {
		t.Helper()
		if _, err := js.Publish(ctx, contracts.Subject(contracts.StageCompleted, "c", turn), data); err != nil {
			t.Fatal(err)
		}
	}
	good, _ := json.Marshal(contracts.Turn{ConversationId: "c", TurnId: "good", Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: "fine"}})
	publish("garbled", []byte(`{"turnId": not json`))
	publish("good", good)
	for comp.Pending() < 2 {
		if ctx.Err() != nil {
			t.Fatalf("%d pending", comp.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if turns, _, bad := comp.Counts(); turns != 2 || bad != 0 {
		t.Fatalf("before any claim: %d turns, %d undecodable (nothing should be decoded yet)", turns, bad)
	}
	if got, err := comp.Wait(ctx, "c", "good"); err != nil || got.Response == nil || got.Response.Text != "fine" {
		t.Fatalf("good: %+v %v", got, err)
	}
	if _, err := comp.Wait(ctx, "c", "garbled"); !errors.Is(err, client.ErrUnreadableCompletion) {
		t.Fatalf("a garbled completion: %v", err)
	}
	if _, _, bad := comp.Counts(); bad != 1 {
		t.Fatalf("%d undecodable after the claim, want 1", bad)
	}
}

// watchAll starts a server with the APTIX stream and a watch of every
// conversation's completions, stopped when the test ends.
func watchAll(t *testing.T, ctx context.Context) (jetstream.JetStream, *client.Completions) {
	t.Helper()
	_, js := natstest.JetStream(t)
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	comp, err := client.WatchCompletions(ctx, js, "*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(comp.Stop)
	return js, comp
}

// TestCompletionsSameTurnIDTwoConversations: two conversations' turns of
// the same id are two completions, each handed to its own waiter, neither
// counted as the other's duplicate.
func TestCompletionsSameTurnIDTwoConversations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, comp := watchAll(t, ctx)
	for _, conv := range []string{"alice", "bob"} {
		data, _ := json.Marshal(contracts.Turn{ConversationId: conv, TurnId: "t1", Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: conv + "'s answer"}})
		if _, err := js.Publish(ctx, contracts.Subject(contracts.StageCompleted, conv, "t1"), data); err != nil {
			t.Fatal(err)
		}
	}
	for _, conv := range []string{"bob", "alice"} {
		got, err := comp.Wait(ctx, conv, "t1")
		if err != nil || got.ConversationId != conv || got.Response.Text != conv+"'s answer" {
			t.Fatalf("%s: %+v %v", conv, got.Response, err)
		}
	}
	if turns, dups, bad := comp.Counts(); turns != 2 || dups != 0 || bad != 0 {
		t.Fatalf("turns %d duplicates %d undecodable %d, want 2 0 0", turns, dups, bad)
	}
}
