package client_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
)

// TestCompletionsTwoWaitersOneTurn: a retry of a turn still running waits
// beside the request that sent it first; both get its answer, and a waiter
// that gives up does not take the other's place.
func TestCompletionsTwoWaitersOneTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, comp := watchAll(t, ctx)
	gone, giveUp := context.WithCancel(ctx)
	var wg sync.WaitGroup
	answers := make(chan string, 2)
	for range 2 {
		wg.Go(func() {
			got, err := comp.Wait(ctx, "c", "t1")
			if err != nil {
				t.Error(err)
				return
			}
			answers <- got.Response.Text
		})
	}
	wg.Go(func() {
		if _, err := comp.Wait(gone, "c", "t1"); err == nil {
			t.Error("a cancelled wait returned an answer")
		}
	})
	time.Sleep(100 * time.Millisecond) // let the waits register
	giveUp()
	time.Sleep(50 * time.Millisecond)
	data, _ := json.Marshal(contracts.Turn{ConversationId: "c", TurnId: "t1", Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: "the answer"}})
	if _, err := js.Publish(ctx, contracts.Subject(contracts.StageCompleted, "c", "t1"), data); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(answers)
	n := 0
	for a := range answers {
		if a != "the answer" {
			t.Fatalf("answer %q", a)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d of 2 waiters answered", n)
	}
}

// TestAnsweredFindsTheTurnsOwnAnswer: Answered returns a completed turn's
// stored answer to a re-send of the same request, skipping turn_id_reused
// answers other requests got under its ids, and nothing to another request
// or before the turn completed.
func TestAnsweredFindsTheTurnsOwnAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, _ := watchAll(t, ctx)
	req := contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t1", Instruction: "question"}
	if _, ok, err := client.Answered(ctx, js, req); ok || err != nil {
		t.Fatalf("before any answer: ok %v, %v", ok, err)
	}
	publish := func(msgID string, turn contracts.Turn) {
		t.Helper()
		data, _ := json.Marshal(turn)
		m := &nats.Msg{Subject: contracts.Subject(contracts.StageCompleted, "c", "t1"), Data: data, Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	other := req
	other.Instruction = "another question"
	own := contracts.MsgID("c", "t1", contracts.StageCompleted)
	// A reused id answered while the turn still ran, then the turn's answer.
	publish(own+contracts.ReusedAnswerMark+"abc", contracts.Turn{ConversationId: "c", TurnId: "t1", Request: other,
		Response: &contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: contracts.CodeTurnIDReused}})
	if _, ok, err := client.Answered(ctx, js, req); ok || err != nil {
		t.Fatalf("with only a turn_id_reused answer: ok %v, %v", ok, err)
	}
	publish(own, contracts.Turn{ConversationId: "c", TurnId: "t1", Request: req, Response: &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Text: "the answer"}})
	got, ok, err := client.Answered(ctx, js, req)
	if err != nil || !ok || got.Response.Text != "the answer" {
		t.Fatalf("a re-send: %+v ok %v, %v", got.Response, ok, err)
	}
	if _, ok, err := client.Answered(ctx, js, other); ok || err != nil {
		t.Fatalf("another request under the same ids: ok %v, %v", ok, err)
	}
}
