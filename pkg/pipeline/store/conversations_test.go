package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// storeCompletion stores a completion of conv/turn as the mapper would
// (kind, response id), with extra headers (a replay's).
func storeCompletion(t *testing.T, js jetstream.JetStream, conv, turn, kind, respID string, hdr map[string]string) contracts.Turn {
	t.Helper()
	tn := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: conv, TurnId: turn, Instruction: "x"})
	tn.Envelope = &contracts.Envelope{Backend: "b1", Tools: json.RawMessage(`[{"type":"function","name":"f"}]`)}
	tn.Tools = &contracts.ToolLoop{Approvals: []contracts.PendingApproval{{ID: "apr_1", Server: "s"}}}
	tn.Response = &contracts.AgentExecuteResponse{Kind: kind, ConversationId: conv, TurnId: turn, ResponseContinuationId: respID}
	msg := nats.NewMsg(contracts.Subject(contracts.StageCompleted, conv, turn))
	data, err := turncodec.Marshal(&tn)
	if err != nil {
		t.Fatal(err)
	}
	msg.Data = data
	for k, v := range hdr {
		msg.Header.Set(k, v)
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	return tn
}

// TestConversationsGetFromCompletion: Get answers what the next turn
// continues from when the record lags the conversation's newest
// completion, and only from a completion that updates the record.
// conversationsOn opens APTIX and the conversations store on a fresh
// server, and a check of what Get answers for conversation c1: the record
// continuing from response id want ("" for none).
func conversationsOn(t *testing.T) (ctx context.Context, js jetstream.JetStream, c *store.Conversations, get func(want string) *store.Conversation) {
	t.Helper()
	ctx = context.Background()
	_, js = natstest.JetStream(t)
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := store.OpenConversations(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	get = func(want string) *store.Conversation {
		t.Helper()
		rec, err := c.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if rec != nil {
			got = rec.ResponseId
		}
		if got != want {
			t.Fatalf("Get: response id %q (%+v), want %q", got, rec, want)
		}
		return rec
	}
	return ctx, js, c, get
}

func TestConversationsGetFromCompletion(t *testing.T) {
	ctx, js, c, get := conversationsOn(t)
	get("") // nothing yet

	// t1 completed; its record is not written yet.
	t1 := storeCompletion(t, js, "c1", "t1", contracts.KindOK, "resp_1", nil)
	rec := get("resp_1")
	want, _ := store.ConversationOf(&t1, rec.UpdatedAt)
	if rec.TurnId != "t1" || rec.Backend != "b1" || string(rec.Tools) != string(want.Tools) || len(rec.Approvals) != 1 || rec.Approvals[0].ID != "apr_1" || rec.UpdatedAt.IsZero() {
		t.Fatalf("derived %+v, want %+v", rec, want)
	}

	// The record of t1, as the mapper writes it: the record answers.
	if err := c.Put(ctx, "c1", store.Conversation{ResponseId: "resp_1_recorded", TurnId: "t1"}); err != nil {
		t.Fatal(err)
	}
	get("resp_1_recorded")

	// A later turn that failed, or a replay that does not continue, leaves
	// the conversation where the record has it.
	storeCompletion(t, js, "c1", "t2", contracts.KindError, "", nil)
	get("resp_1_recorded")
	storeCompletion(t, js, "c1", "t3", contracts.KindOK, "resp_3", map[string]string{contracts.HeaderReplayOf: "t1"})
	get("resp_1_recorded")

	// A replay that continues, and a plain later turn, move it on.
	storeCompletion(t, js, "c1", "t4", contracts.KindOK, "resp_4", map[string]string{contracts.HeaderReplayOf: "t1", contracts.HeaderReplayContinue: "true"})
	get("resp_4")
	storeCompletion(t, js, "c1", "t5", contracts.KindOK, "resp_5", nil)
	get("resp_5")

	// Another conversation's completions are not this one's.
	storeCompletion(t, js, "c10", "t6", contracts.KindOK, "resp_6", nil)
	get("resp_5")
	if rec, err := c.Record(ctx, "c1"); err != nil || rec.ResponseId != "resp_1_recorded" {
		t.Fatalf("Record %+v (%v): Get must not write", rec, err)
	}
}

// TestConversationsGetPastAFailedTurn: a completion whose record lags (its
// mapper was killed after storing it, and is redelivered only after the ack
// wait) is still what the next turn continues from when a later turn
// failed: the failed turn's error completion, the newest, leaves the
// conversation where the lagging completion has it, not where the record
// does. The same holds for a record a redelivered mapper wrote late over a
// later turn's, and for a turn_id_reused completion.
func TestConversationsGetPastAFailedTurn(t *testing.T) {
	ctx, js, c, get := conversationsOn(t)
	// The first turn's record is not written yet; the next turn failed.
	storeCompletion(t, js, "c1", "t1", contracts.KindOK, "resp_1", nil)
	storeCompletion(t, js, "c1", "t2", contracts.KindError, "", nil)
	get("resp_1")

	// t3 answered and recorded; t1's mapper, redelivered, writes its
	// record late over t3's; t4 fails; a turn_id_reused completion of t1.
	storeCompletion(t, js, "c1", "t3", contracts.KindOK, "resp_3", nil)
	if err := c.Put(ctx, "c1", store.Conversation{ResponseId: "resp_3", TurnId: "t3"}); err != nil {
		t.Fatal(err)
	}
	get("resp_3")
	if err := c.Put(ctx, "c1", store.Conversation{ResponseId: "resp_1", TurnId: "t1"}); err != nil {
		t.Fatal(err)
	}
	get("resp_3")
	storeCompletion(t, js, "c1", "t4", contracts.KindError, "", nil)
	get("resp_3")
	storeCompletion(t, js, "c1", "t1", contracts.KindError, "", map[string]string{
		contracts.HeaderMsgID: contracts.MsgID("c1", "t1", contracts.StageCompleted) + contracts.ReusedAnswerMark + "0123456789ab"})
	get("resp_3")

	// A replay that does not continue is passed over too.
	storeCompletion(t, js, "c1", "t5", contracts.KindOK, "resp_5", nil)
	storeCompletion(t, js, "c1", "t6", contracts.KindOK, "resp_6", map[string]string{contracts.HeaderReplayOf: "t5"})
	get("resp_5")
}
