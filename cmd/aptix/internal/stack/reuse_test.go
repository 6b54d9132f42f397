package stack

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestTurnIDReused: a turn id re-sent with a different request is
// answered with turn_id_reused, never silently with the old answer: by
// Submit when JetStream de-duplicates it, and by an error completion when a
// client publishes it without Nats-Msg-Id.
func TestTurnIDReused(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := contracts.AgentExecuteRequest{ConversationId: "reuse", TurnId: "t1", Instruction: "first question", RagScope: contracts.RagScopeNone}
	if r := e.turn(first).Response; r.Kind != contracts.KindOK || !strings.Contains(r.Text, "first question") {
		t.Fatalf("first: %+v", r)
	}
	// The same request again (a client retry) is fine.
	if err := client.Submit(ctx, e.js, first); err != nil {
		t.Fatalf("a retry of the same request: %v", err)
	}
	second := first
	second.Instruction = "a different question"
	if err := client.Submit(ctx, e.js, second); !errors.Is(err, client.ErrTurnIDReused) {
		t.Fatalf("Submit of a reused turn id: %v", err)
	}
	// Published raw, with no Nats-Msg-Id: the retriever answers with an error completion.
	data, _ := json.Marshal(second)
	if _, err := e.js.Publish(ctx, contracts.Subject(contracts.StageRequested, "reuse", "t1"), data); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := e.await(ctx, "reuse", "t1").Response
		if got.Kind == contracts.KindError {
			if got.ErrorCode != contracts.CodeTurnIDReused || !strings.Contains(got.ErrorMessage, "new turn id") {
				t.Fatalf("reused: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reused turn id was answered with the old answer: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A reused id whose new request the retriever would reject (no
	// instruction) is still answered turn_id_reused, the third completion.
	invalid := first
	invalid.Instruction = ""
	data, _ = json.Marshal(invalid)
	if _, err := e.js.Publish(ctx, contracts.Subject(contracts.StageRequested, "reuse", "t1"), data); err != nil {
		t.Fatal(err)
	}
	// And the first request published raw again (past Submit's check) is
	// no reuse: it is answered by nothing new, and not paid again.
	data, _ = json.Marshal(first)
	if _, err := e.js.Publish(ctx, contracts.Subject(contracts.StageRequested, "reuse", "t1"), data); err != nil {
		t.Fatal(err)
	}
	subject := contracts.Subject(contracts.StageCompleted, "reuse", "t1")
	for n := 0; n != 3; {
		info, err := e.js.Stream(ctx, contracts.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		st, err := info.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		n = int(st.State.Subjects[subject])
		if n > 3 || time.Now().After(deadline) {
			t.Fatalf("%d completions of the turn, want 3 (ok, reused, reused)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.await(ctx, "reuse", "t1").Response; got.ErrorCode != contracts.CodeTurnIDReused {
		t.Fatalf("a reused id with an invalid request: %+v", got)
	}
	e.settled()
	if e.sb.Requests() != 1 {
		t.Fatalf("the model was called %d times", e.sb.Requests())
	}
}

// TestHostileSubjectIDs: a request on a subject whose id tokens
// are wildcards is dead-lettered, and nothing is published on a wildcard
// subject; Submit refuses such ids before publishing.
func TestHostileSubjectIDs(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := context.Background()
	for _, tok := range []string{"*", ">"} {
		if err := client.Submit(ctx, e.js, contracts.AgentExecuteRequest{ConversationId: "bad", TurnId: tok, Instruction: "x"}); err == nil {
			t.Fatalf("Submit accepted turn id %q", tok)
		}
	}
	req := `{"conversationId":"bad","turnId":">","instruction":"x"}`
	if _, err := e.js.Publish(ctx, "aptix.requested.bad.>", []byte(req)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.count(contracts.DeadSubject("retriever")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the wildcard request was not dead-lettered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, _ := e.js.Stream(ctx, contracts.StreamName)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	for subj := range info.State.Subjects {
		if strings.ContainsAny(subj, "*>") {
			t.Fatalf("an event was stored on %q", subj)
		}
	}
	e.settled()
}
