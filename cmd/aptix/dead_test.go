package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
)

// TestDeadLetterRetry: a turn whose retrieval index is down is retried with
// backoff, dead-lettered and answered with an error; once the index is back,
// `aptix dead retry` re-drives it and the turn completes, once, with the
// retrieved context, and the dead letter is gone.
func TestDeadLetterRetry(t *testing.T) {
	d := newDebugStack(t)
	d.indexDown.Store(true)
	req := contracts.AgentExecuteRequest{ConversationId: "c-dead", TurnId: "t-dead", Instruction: "Where are retries scheduled?"}
	first := d.turn(req)
	if first.Response.Kind != contracts.KindError || first.Response.ErrorCode != pipeline.CodeStageFailed || !strings.Contains(first.Response.ErrorMessage, "index unavailable") {
		t.Fatalf("with the index down: %+v", first.Response)
	}
	if n := d.searches.Load(); n != 3 {
		t.Fatalf("%d searches, want MaxDeliver = 3", n)
	}
	ctx := d.ctx()
	letters, err := deadLetters(ctx, d.js, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].FromStage != "retriever" || letters[0].Original != "aptix.requested.c-dead.t-dead" ||
		letters[0].Deliveries != 3 || !strings.Contains(letters[0].Reason, "index unavailable") {
		t.Fatalf("dead letters: %+v", letters)
	}
	var ls bytes.Buffer
	if err := listDead(&ls, letters, letters[0].Time.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ls.String(), "retriever  aptix.requested.c-dead.t-dead  3           gave up after 3 deliveries: index unavailable") || !strings.Contains(ls.String(), "1m30s") {
		t.Fatalf("dead ls:\n%s", ls.String())
	}
	if other, err := deadLetters(ctx, d.js, "mapper"); err != nil || len(other) != 0 {
		t.Fatalf("--stage mapper: %v %v", other, err)
	}

	d.indexDown.Store(false)
	var out bytes.Buffer
	if err := retryDead(ctx, d.js, letters, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "retried") {
		t.Fatalf("retry output: %s", out.String())
	}
	var done contracts.Turn
	for deadline := time.Now().Add(20 * time.Second); ; {
		done, err = client.Await(ctx, d.js, "c-dead", "t-dead")
		if err != nil {
			t.Fatal(err)
		}
		if done.Response.Kind != contracts.KindError || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := done.Response
	if r.Kind != contracts.KindOK || !strings.Contains(r.Text, "ck_retry") || len(r.Sources) != 2 {
		t.Fatalf("after the retry: %+v", r)
	}
	// Two completions in all: the error, then the retried turn's answer.
	if n := d.count("aptix.completed.c-dead.t-dead"); n != 2 {
		t.Fatalf("%d completions, want the error and one answer", n)
	}
	if n := d.sb.Requests(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if left, err := deadLetters(ctx, d.js, ""); err != nil || len(left) != 0 {
		t.Fatalf("dead letters after the retry: %v %v", left, err)
	}
	// Retrying the same dead letter again finds nothing: it was deleted.
	if _, err := deadLetter(ctx, d.js, letters[0].Seq); err == nil {
		t.Fatal("the retried dead letter is still readable")
	}
}

// TestDeadPurge: purge by stage removes only that stage's dead letters.
func TestDeadPurge(t *testing.T) {
	d := newDebugStack(t)
	d.indexDown.Store(true)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-p", TurnId: "t-p1", Instruction: "one"})
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-p", TurnId: "t-p2", Instruction: "two"})
	ctx := d.ctx()
	if n, err := purgeDead(ctx, d.js, "mapper"); err != nil || n != 0 {
		t.Fatalf("purge mapper: %d %v", n, err)
	}
	if n, err := purgeDead(ctx, d.js, "retriever"); err != nil || n != 2 {
		t.Fatalf("purge retriever: %d %v", n, err)
	}
	if n := d.count(contracts.DeadPrefix + ".>"); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
	if _, err := purgeDead(ctx, d.js, "nope"); err == nil {
		t.Fatal("purge --stage nope accepted")
	}
}
