package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// record reads a conversation's continuation record.
func (d *debugStack) record(conv string) *store.Conversation {
	d.t.Helper()
	convs, err := store.OpenConversations(context.Background(), d.js, 1)
	if err != nil {
		d.t.Fatal(err)
	}
	rec, err := convs.Get(context.Background(), conv)
	if err != nil {
		d.t.Fatal(err)
	}
	return rec
}

// replay runs `aptix replay` for one turn and returns the new completion.
func (d *debugStack) replay(f replayFlags) contracts.Turn {
	d.t.Helper()
	var out, errOut bytes.Buffer
	got, err := replayTurn(d.ctx(), d.js, f, &out, &errOut)
	if err != nil {
		d.t.Fatalf("replay %+v: %v\n%s%s", f, err, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "aptix: replay of turn "+f.turn+" from "+f.from) {
		d.t.Fatalf("replay stderr: %s", errOut.String())
	}
	return got
}

// header reads a header of the last stored event on subject.
func (d *debugStack) header(subject, key string) string {
	d.t.Helper()
	s, err := d.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		d.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		d.t.Fatalf("%s: %v", subject, err)
	}
	return m.Header.Get(key)
}

// TestReplayFromEachStage replays one turn from every stage: each replay
// completes under its new turn id with the replay header and a span linked
// to the original trace; the stages before the model call it again (a new
// turn id is a new pay-once key), the mapper's does not; the original's
// completion and the conversation's record are untouched; another backend
// and model give another answer.
func TestReplayFromEachStage(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	d := newDebugStack(t)
	orig := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-r", TurnId: "t1", Mode: "ANALYZE", Instruction: "Explain the retry policy"})
	o := orig.Response
	if o.Kind != contracts.KindOK || !strings.Contains(o.Text, "ck_retry") || d.sb.Requests() != 1 {
		t.Fatalf("original: %+v (%d calls)", o, d.sb.Requests())
	}
	origTrace := history.TraceID(map[string][]string(mustHeader(t, d, "aptix.enveloped.c-r.t1")))

	calls := 1
	for _, from := range []string{"retriever", "envelope", "llmcaller", "mapper"} {
		r := d.replay(replayFlags{conversation: "c-r", turn: "t1", from: from, newTurn: "t1-" + from})
		resp := r.Response
		if resp.Kind != contracts.KindOK || resp.TurnId != "t1-"+from || resp.ConversationId != "c-r" {
			t.Fatalf("--from %s: %+v", from, resp)
		}
		if from != "mapper" {
			calls++
		}
		if n := d.sb.Requests(); n != calls {
			t.Fatalf("--from %s: %d model calls, want %d", from, n, calls)
		}
		// The original was the conversation's first turn: its replay does
		// not continue from the record t1 left (the sandbox would say so).
		if resp.Text != o.Text {
			t.Fatalf("--from %s: %q, want the original's %q", from, resp.Text, o.Text)
		}
		if !strings.Contains(resp.Text, "Explain the retry policy") || !strings.Contains(resp.Text, "ck_retry") {
			t.Fatalf("--from %s text %q", from, resp.Text)
		}
		if h := d.header("aptix.completed.c-r.t1-"+from, contracts.HeaderReplayOf); h != "t1" {
			t.Fatalf("--from %s: completed event's %s = %q", from, contracts.HeaderReplayOf, h)
		}
		if from != "mapper" && resp.ResponseContinuationId == o.ResponseContinuationId {
			t.Fatalf("--from %s: the model was not called again (same response id)", from)
		}
	}
	// The original turn and the conversation's record are as they were.
	if again := d.turnResult("c-r", "t1"); again.ResponseContinuationId != o.ResponseContinuationId {
		t.Fatalf("the original's completion changed: %+v", again)
	}
	if n := d.count("aptix.completed.c-r.t1"); n != 1 {
		t.Fatalf("%d completions of the original", n)
	}
	if rec := d.record("c-r"); rec == nil || rec.TurnId != "t1" || rec.ResponseId != o.ResponseContinuationId {
		t.Fatalf("a replay moved the conversation's record: %+v", rec)
	}

	// The replay's producer span is a new trace linked to the original's.
	_ = tp.ForceFlush(context.Background())
	linked := false
	for _, s := range exp.GetSpans() {
		if s.Name != "send aptix.enveloped" || len(s.Links) != 1 {
			continue
		}
		if s.Links[0].SpanContext.TraceID().String() == origTrace && s.SpanContext.TraceID().String() != origTrace {
			linked = true
		}
	}
	if !linked {
		t.Fatalf("no replay span of aptix.enveloped links to the original trace %s", origTrace)
	}

	// Another backend and model: another answer, from the other upstream.
	other := d.replay(replayFlags{conversation: "c-r", turn: "t1", from: "llmcaller", backend: "other", model: "other-1", newTurn: "t1-other"})
	if other.Response.Text != "Answer from the other backend." || other.Response.ModelId != "other-1" || other.LLM.Backend != "other" || d.other.Requests() != 1 {
		t.Fatalf("--backend other: %+v (other got %d calls)", other.Response, d.other.Requests())
	}
	var sent map[string]any
	if err := json.Unmarshal(d.other.LastRequest(), &sent); err != nil || sent["model"] != "other-1" {
		t.Fatalf("body sent to the other backend: %v %v", sent, err)
	}

	// --continue: the replay becomes the conversation's latest turn.
	cont := d.replay(replayFlags{conversation: "c-r", turn: "t1", from: "envelope", newTurn: "t1-cont", cont: true})
	if rec := d.record("c-r"); rec == nil || rec.TurnId != "t1-cont" || rec.ResponseId != cont.Response.ResponseContinuationId {
		t.Fatalf("--continue did not move the record: %+v", rec)
	}
}

// TestReplayConversation re-runs a two-turn conversation into a new one:
// the second replayed turn continues from the first replayed turn, and the
// original conversation's record stays on its own last turn.
func TestReplayConversation(t *testing.T) {
	d := newDebugStack(t)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-w", TurnId: "w1", Instruction: "first"})
	second := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-w", TurnId: "w2", Instruction: "second"})
	var out bytes.Buffer
	f := replayFlags{conversation: "c-w", from: "requested", into: "c-w2"}
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	if err := replayConversation(d.ctx(), d.js, f, &out, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "--- turn 1 of 2: w1") || !strings.Contains(out.String(), "--- turn 2 of 2: w2") {
		t.Fatalf("output:\n%s", out.String())
	}
	turns, err := history.ConversationTurns(d.ctx(), d.js, "c-w2", false)
	if err != nil || len(turns) != 2 {
		t.Fatalf("replayed turns %v %v", turns, err)
	}
	first := d.turnResult("c-w2", turns[0])
	_, env, err := history.TurnEvent(d.ctx(), d.js, contracts.StageEnveloped, "c-w2", turns[1])
	if err != nil {
		t.Fatal(err)
	}
	var et contracts.Turn
	if err := json.Unmarshal(env, &et); err != nil {
		t.Fatal(err)
	}
	if et.Request.ResponseContinuationId != first.ResponseContinuationId || first.ResponseContinuationId == "" {
		t.Fatalf("replayed turn 2 continues from %q, want replayed turn 1's %q", et.Request.ResponseContinuationId, first.ResponseContinuationId)
	}
	if rec := d.record("c-w"); rec.TurnId != "w2" || rec.ResponseId != second.Response.ResponseContinuationId {
		t.Fatalf("original record moved: %+v", rec)
	}
	if rec := d.record("c-w2"); rec == nil || rec.TurnId != turns[1] {
		t.Fatalf("new conversation's record: %+v", rec)
	}
	if err := (replayFlags{conversation: "c-w", from: "llmcaller"}).validate(); err == nil {
		t.Fatal("--from llmcaller without --turn accepted")
	}
	if err := (replayFlags{conversation: "c-w", turn: "w1", from: "mapper", model: "x"}).validate(); err == nil {
		t.Fatal("--from mapper --model accepted")
	}
}

func (d *debugStack) turnResult(conv, turn string) contracts.AgentExecuteResponse {
	d.t.Helper()
	got, err := client.Await(d.ctx(), d.js, conv, turn)
	if err != nil || got.Response == nil {
		d.t.Fatalf("turn %s/%s: %v", conv, turn, err)
	}
	return *got.Response
}

func mustHeader(t *testing.T, d *debugStack, subject string) map[string][]string {
	t.Helper()
	s, err := d.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header
}

// TestReplayAfterUpstreamFailure: an upstream that fails every attempt of a
// turn is not a dead letter but the turn's error result (the llmcaller
// records upstream failures as data); once the upstream is back, a replay
// from the llmcaller calls it again under the new turn id (pay-once is per
// turn) and answers, while the original keeps its error.
func TestReplayAfterUpstreamFailure(t *testing.T) {
	d := newDebugStackWith(t, sandbox.Options{FailFirst: 2, FailStatus: 503}) // MaxRetries 1: both attempts of the first turn
	orig := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-u", TurnId: "u1", Instruction: "Explain the retry policy"})
	if orig.Response.Kind != contracts.KindError || orig.LLM == nil || orig.LLM.Attempts != 2 || orig.LLM.Status != 503 {
		t.Fatalf("with the upstream failing: %+v (llm %+v)", orig.Response, orig.LLM)
	}
	if n := d.count(contracts.DeadPrefix + ".>"); n != 0 {
		t.Fatalf("%d dead letters for an upstream failure", n)
	}
	r := d.replay(replayFlags{conversation: "c-u", turn: "u1", from: "llmcaller", newTurn: "u1-again"})
	if r.Response.Kind != contracts.KindOK || !strings.Contains(r.Response.Text, "Explain the retry policy") || r.LLM.Cached || d.sb.Requests() != 3 {
		t.Fatalf("replay after recovery: %+v (%d upstream requests)", r.Response, d.sb.Requests())
	}
	if again := d.turnResult("c-u", "u1"); again.Kind != contracts.KindError {
		t.Fatalf("the original's result changed: %+v", again)
	}
}

// TestReplayNewConversationIntoAnother: a turn that started its
// conversation (newConversation, as `aptix exec` without --conversation
// sends it) replayed into another, existing conversation continues that
// conversation, as any replay into it does: the flag said the original's
// conversation id was new, which the replay's is not.
func TestReplayNewConversationIntoAnother(t *testing.T) {
	d := newDebugStack(t)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-na", NewConversation: true, TurnId: "na1", Instruction: "first"})
	b := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-nb", TurnId: "nb1", Instruction: "other"})
	r := d.replay(replayFlags{conversation: "c-na", turn: "na1", from: "envelope", into: "c-nb", newTurn: "na1-into"})
	_, env, err := history.TurnEvent(d.ctx(), d.js, contracts.StageEnveloped, "c-nb", "na1-into")
	if err != nil {
		t.Fatal(err)
	}
	var et contracts.Turn
	if err := json.Unmarshal(env, &et); err != nil {
		t.Fatal(err)
	}
	if want := b.Response.ResponseContinuationId; et.Request.ResponseContinuationId != want || !strings.Contains(r.Response.Text, "Continuing from "+want) {
		t.Fatalf("the replay into c-nb continues from %q (text %q), want c-nb's %q", et.Request.ResponseContinuationId, r.Response.Text, want)
	}
}
