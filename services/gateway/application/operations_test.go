package application

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// testApp is an application on an embedded NATS with the pipeline's
// streams and no stage running: a turn it submits stays queued until the
// test completes it (complete).
func testApp(t *testing.T) *App {
	t.Helper()
	nc, js := natstest.JetStream(t)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	a, err := New(ctx, Config{NC: nc, Profiles: profiles.Builtin(), SyncTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// replica is another gateway replica on a's bus (or one started after a
// restart): it shares nothing with a but the bus.
func replica(t *testing.T, a *App) *App {
	t.Helper()
	b, err := New(context.Background(), Config{NC: a.cfg.NC, Profiles: profiles.Builtin(), SyncTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// written reports whether id's record was written to the bucket.
func written(t *testing.T, a *App, id string) bool {
	t.Helper()
	_, err := a.store.kv.Get(context.Background(), respKey(id))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// complete publishes the completed event of meta's turn, as the mapper
// would (the request the turn was submitted with carried on): the model
// answered text, continuing upstream response upID.
func complete(t *testing.T, a *App, meta *responses.Meta, text, upID string) {
	t.Helper()
	req, err := a.request(context.Background(), meta.ConversationID, meta.TurnID)
	if err != nil || req == nil {
		t.Fatalf("the turn's request: %v %v", req, err)
	}
	body, _ := json.Marshal(map[string]any{"id": upID, "status": "completed", "output": []any{map[string]any{"type": "message", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}}, "usage": map[string]int{"input_tokens": 3, "output_tokens": 2}})
	done := contracts.Turn{ConversationId: meta.ConversationID, TurnId: meta.TurnID, Request: *req,
		LLM:      &contracts.LLMResult{Backend: "sandbox", Model: "sandbox-1", Status: 200, Body: string(body)},
		Response: &contracts.AgentExecuteResponse{ConversationId: meta.ConversationID, TurnId: meta.TurnID, Backend: "sandbox", ResponseContinuationId: upID}}
	b, err := json.Marshal(done)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.js.Publish(context.Background(), contracts.Subject(contracts.StageCompleted, meta.ConversationID, meta.TurnID), b); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, body string) *responses.CreateRequest {
	t.Helper()
	req, e := responses.Parse([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	return req
}

// TestOperationsWithoutHTTP: the application's operations are plain calls
// with the caller's principal, no HTTP in between: a create is recorded
// and submitted, another principal's get, cancel and delete find nothing
// (404), the owner's cancel stops it (a cancelled response, as get then
// shows it), and a delete removes it. A response that starts its
// conversation has no record written: another replica, or one started
// after a restart, reads it from the turn's events, and sees it deleted.
func TestOperationsWithoutHTTP(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice, bob := auth.Principal{ID: "alice"}, auth.Principal{ID: "bob"}

	run, e := a.Start(ctx, alice, Turn{Request: create(t, `{"model":"sandbox-1","input":"hello"}`)})
	if e != nil {
		t.Fatal(e)
	}
	run.Close()
	id := run.Meta.ID
	if run.Meta.Owner != "alice" || run.Meta.ConversationID != firstConversation(run.Meta.TurnID) {
		t.Fatalf("record: %+v", run.Meta)
	}
	if written(t, a, id) {
		t.Fatal("a response that starts its conversation had its record written")
	}
	other := replica(t, a)
	got, e := a.Get(ctx, alice, id)
	// A transparent turn enters at aptix.enveloped (it needs nothing of
	// the retriever or the envelope): the LLM caller has it, in_progress.
	if e != nil || got.ID != id || got.Status != responses.StatusInProgress {
		t.Fatalf("get: %+v %v", got, e)
	}
	if got, e := other.Get(ctx, alice, id); e != nil || got.ID != id || got.Status != responses.StatusInProgress || got.Model != run.Meta.Model {
		t.Fatalf("get on another replica: %+v %v", got, e)
	}
	for _, op := range []func() *responses.Error{
		func() *responses.Error { _, e := a.Get(ctx, bob, id); return e },
		func() *responses.Error { _, e := a.Cancel(ctx, bob, id); return e },
		func() *responses.Error { _, e := a.Delete(ctx, bob, id); return e },
		func() *responses.Error { _, e := a.Get(ctx, alice, "resp_a.b"); return e },
	} {
		if e := op(); e == nil || e.Status != 404 {
			t.Fatalf("another principal's response, or no such id: %v, want 404", e)
		}
	}
	cancelled, e := a.Cancel(ctx, alice, id)
	if e != nil || cancelled.Status != responses.StatusCancelled {
		t.Fatalf("cancel: %+v %v", cancelled, e)
	}
	if got, e = a.Get(ctx, alice, id); e != nil || got.Status != responses.StatusCancelled {
		t.Fatalf("get after cancel: %+v %v", got, e)
	}
	if d, e := a.Delete(ctx, alice, id); e != nil || !d.Deleted || d.ID != id {
		t.Fatalf("delete: %+v %v", d, e)
	}
	for _, g := range []*App{a, other, replica(t, a)} {
		if _, e := g.Get(ctx, alice, id); e == nil || e.Status != 404 {
			t.Fatalf("get after delete: %v, want 404", e)
		}
	}
	if _, e := other.Start(ctx, alice, Turn{Request: create(t, `{"model":"sandbox-1","input":"again","previous_response_id":"`+id+`"}`)}); e == nil || e.Status != 400 {
		t.Fatalf("continuing a deleted response: %v, want 400", e)
	}
}

// TestContinuationMovesHead: the create/continue operation moves
// conversation heads. A followed turn's outcome is its completed
// response and the backend that served it; the first continuation of a
// conversation's first response continues that conversation, a second
// continuation of the same response branches into a new one (its
// conversation went on), and a continuation of a response still running
// is refused.
func TestContinuationMovesHead(t *testing.T) {
	a := testApp(t)
	ctx := context.Background()
	alice := auth.Principal{ID: "alice"}

	first, e := a.Start(ctx, alice, Turn{Request: create(t, `{"model":"sandbox-1","input":"one"}`)})
	if e != nil {
		t.Fatal(e)
	}
	defer first.Close()
	complete(t, a, first.Meta, "first answer", "up_1")
	resp, backend, e := a.Outcome(ctx, first)
	if e != nil || resp.Status != responses.StatusCompleted || backend != "sandbox" || resp.OutputText() != "first answer" {
		t.Fatalf("outcome: %+v backend %q %v", resp, backend, e)
	}

	cont := `{"model":"sandbox-1","input":"two","previous_response_id":"` + first.Meta.ID + `"}`
	second, e := a.Start(ctx, alice, Turn{Request: create(t, cont)})
	if e != nil {
		t.Fatal(e)
	}
	second.Close()
	if second.Meta.ConversationID != first.Meta.ConversationID || second.Meta.ContinuedFrom != "up_1" {
		t.Fatalf("continuation runs in %s from %q, want %s from up_1", second.Meta.ConversationID, second.Meta.ContinuedFrom, first.Meta.ConversationID)
	}
	// Its id does not name its conversation: its record is written (by
	// the time Start returns), and every replica reads both responses.
	if written(t, a, first.Meta.ID) || !written(t, a, second.Meta.ID) {
		t.Fatalf("records written: first %v (want false), continuation %v (want true)", written(t, a, first.Meta.ID), written(t, a, second.Meta.ID))
	}
	other := replica(t, a)
	if got, e := other.Get(ctx, alice, first.Meta.ID); e != nil || got.Status != responses.StatusCompleted || got.OutputText() != "first answer" {
		t.Fatalf("the first response on another replica: %+v %v", got, e)
	}
	if got, e := other.Get(ctx, alice, second.Meta.ID); e != nil || got.PreviousResponseID == nil || *got.PreviousResponseID != first.Meta.ID {
		t.Fatalf("the continuation on another replica: %+v %v", got, e)
	}
	branch, e := a.Start(ctx, alice, Turn{Request: create(t, cont)})
	if e != nil {
		t.Fatal(e)
	}
	branch.Close()
	if branch.Meta.ConversationID == first.Meta.ConversationID || branch.Meta.ContinuedFrom != "up_1" {
		t.Fatalf("a second continuation of the same response runs in %s from %q: want a branch from up_1", branch.Meta.ConversationID, branch.Meta.ContinuedFrom)
	}
	_, e = a.Start(ctx, alice, Turn{Request: create(t, `{"model":"sandbox-1","input":"three","previous_response_id":"`+second.Meta.ID+`"}`)})
	// A transparent turn enters at aptix.retrieved (the retriever skipped),
	// so it is in the turn stream at once: in progress, not yet answered.
	if e == nil || e.Status != 409 || e.Code == nil || *e.Code != responses.CodePreviousInProgress {
		t.Fatalf("continuing a response still in progress: %v, want 409 %s", e, responses.CodePreviousInProgress)
	}
	_, e = a.Start(ctx, auth.Principal{ID: "bob"}, Turn{Request: create(t, cont)})
	if e == nil || e.Status != 400 {
		t.Fatalf("continuing another principal's response: %v, want 400 (not found)", e)
	}
}
