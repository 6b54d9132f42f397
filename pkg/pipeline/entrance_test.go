package pipeline

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestEntryOf: a valid request with no retrieval (ragScope none: every
// transparent HTTP turn, an execute event that asks for none) enters past
// the retriever; one that retrieves, leaves the scope to the default, or is
// invalid enters at aptix.requested, where the retriever searches or answers
// it invalid_request.
func TestEntryOf(t *testing.T) {
	ok := func(edit func(*contracts.AgentExecuteRequest)) contracts.AgentExecuteRequest {
		r := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone}
		edit(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  contracts.AgentExecuteRequest
		want string
	}{
		{"no retrieval", ok(func(*contracts.AgentExecuteRequest) {}), contracts.StageRetrieved},
		{"transparent", ok(func(r *contracts.AgentExecuteRequest) { r.Framing = contracts.FramingNone }), contracts.StageRetrieved},
		{"default scope retrieves", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = "" }), contracts.StageRequested},
		{"workspace", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeWorkspace }), contracts.StageRequested},
		{"repo", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeRepo }), contracts.StageRequested},
		{"active files", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeActiveFiles }), contracts.StageRequested},
		{"invalid: no instruction", ok(func(r *contracts.AgentExecuteRequest) { r.Instruction = " " }), contracts.StageRequested},
		{"invalid: bad id", ok(func(r *contracts.AgentExecuteRequest) { r.TurnId = "a.b" }), contracts.StageRequested},
		{"invalid: framing", ok(func(r *contracts.AgentExecuteRequest) { r.Framing = "xml" }), contracts.StageRequested},
	} {
		if got := EntryOf(c.req); got != c.want {
			t.Errorf("%s: EntryOf = %s, want %s", c.name, got, c.want)
		}
	}
}

// entryEvent reads the turn's last event on a stage of APTIX.
func entryEvent(t *testing.T, js jetstream.JetStream, stage, conv, turn string) (*jetstream.RawStreamMsg, contracts.Turn) {
	t.Helper()
	s, err := js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), contracts.Subject(stage, conv, turn))
	if err != nil {
		t.Fatalf("%s event of %s/%s: %v", stage, conv, turn, err)
	}
	var tu contracts.Turn
	if err := turncodec.Unmarshal(m.Data, &tu); err != nil {
		t.Fatal(err)
	}
	return m, tu
}

func queued(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	q, err := js.Stream(context.Background(), contracts.QueueStreamName)
	if err != nil {
		t.Fatal(err)
	}
	n, err := QueuedRequests(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEntranceSkipsTheRetriever: a turn with no retrieval is stored once,
// as its retrieved event, with the retrieval section the retriever writes,
// the retriever's Nats-Msg-Id, its own ce-source and the skipped marker;
// nothing is queued. The same request sent again is in already; another
// request under its turn id is refused turn_id_reused; a turn that
// retrieves is queued for the retriever.
func TestEntranceSkipsTheRetriever(t *testing.T) {
	nc, js := natstest.JetStream(t)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	e, err := NewEntrance(nc, layout.StreamConfig{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	req := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone, Framing: contracts.FramingNone}
	entry, err := e.Submit(ctx, req)
	if err != nil || entry != contracts.StageRetrieved {
		t.Fatalf("Submit = %q, %v; want %s", entry, err, contracts.StageRetrieved)
	}
	m, tu := entryEvent(t, js, contracts.StageRetrieved, "c1", "t1")
	if got := m.Header.Get(contracts.HeaderSkipped); got != "retriever" {
		t.Errorf("%s = %q, want retriever", contracts.HeaderSkipped, got)
	}
	if got := m.Header.Get(contracts.HeaderCESource); got != "aptix/test" {
		t.Errorf("ce-source %q: the event must say who wrote it", got)
	}
	if got, want := m.Header.Get(contracts.HeaderMsgID), contracts.MsgID("c1", "t1", contracts.StageRetrieved); got != want {
		t.Errorf("Nats-Msg-Id %q, want the retriever's own %q", got, want)
	}
	if m.Header.Get(contracts.HeaderTraceparent) == "" && m.Header.Get("traceparent") == "" {
		// No tracer provider in tests: nothing to propagate, which is fine.
		t.Log("no trace context (no tracer provider)")
	}
	if tu.Retrieval == nil || tu.Retrieval.Scope != contracts.RagScopeNone || len(tu.Retrieval.Chunks) != 0 {
		t.Errorf("retrieval section %+v, want the retriever's for ragScope none", tu.Retrieval)
	}
	if n := queued(t, js); n != 0 {
		t.Errorf("%d requests queued for a turn that skips the retriever", n)
	}

	// Sent again: in already, stored once.
	if entry, err := e.Submit(ctx, req); err != nil || entry != contracts.StageRetrieved {
		t.Fatalf("the same turn sent again: %q, %v", entry, err)
	}
	s, _ := js.Stream(ctx, contracts.StreamName)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.Subject(contracts.StageRetrieved, "c1", "t1")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[contracts.Subject(contracts.StageRetrieved, "c1", "t1")]; n != 1 {
		t.Errorf("%d retrieved events for one turn sent twice", n)
	}
	// Another request under the same turn id: refused.
	other := req
	other.Instruction = "something else"
	if _, err := e.Submit(ctx, other); !errors.Is(err, client.ErrTurnIDReused) {
		t.Errorf("a reused turn id: %v, want ErrTurnIDReused", err)
	}

	// A turn that retrieves, and an invalid one, go to the queue.
	withRAG := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t2", Instruction: "hi", RagScope: contracts.RagScopeWorkspace}
	if entry, err := e.Submit(ctx, withRAG); err != nil || entry != contracts.StageRequested {
		t.Fatalf("a turn with retrieval: %q, %v; want %s", entry, err, contracts.StageRequested)
	}
	invalid := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t3", Instruction: " ", RagScope: contracts.RagScopeNone}
	if entry, err := e.Submit(ctx, invalid); err != nil || entry != contracts.StageRequested {
		t.Fatalf("an invalid turn: %q, %v; want %s (the retriever answers it invalid_request)", entry, err, contracts.StageRequested)
	}
	if n := queued(t, js); n != 2 {
		t.Errorf("%d requests queued, want 2", n)
	}
	by, q := e.Entered()
	if by[contracts.StageRetrieved] != 2 || by[contracts.StageRequested] != 2 || q != 0 {
		t.Errorf("Entered() = %v, %d", by, q)
	}
}

// TestEntranceQueuesWithoutRoom: while APTIX is above the mark the first
// stage admits at, a turn that could skip the retriever is queued instead,
// so the queue's cap, the admission hold and the at_capacity answer apply
// to it as to every request; a full queue then refuses it (ErrAtCapacity).
func TestEntranceQueuesWithoutRoom(t *testing.T) {
	nc, js := natstest.JetStream(t)
	ctx := context.Background()
	c := layout.StreamConfig{QueueMaxBytes: 4 << 10, HistoryMaxBytes: 8 << 10, WorkMaxBytes: 16 << 10}
	if _, err := layout.EnsureStream(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	// Fill APTIX past its admission mark with completions.
	pad := strings.Repeat("x", 1024)
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if int64(info.State.Bytes) >= c.AdmitBelow() {
			break
		}
		if _, err := js.Publish(ctx, contracts.Subject(contracts.StageCompleted, "fill", "t"+strconv.Itoa(i)), []byte(pad)); err != nil {
			t.Fatal(err)
		}
	}
	e, err := NewEntrance(nc, c, "test")
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := range 16 {
		req := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t" + strings.Repeat("1", i+1), Instruction: "hi " + pad, RagScope: contracts.RagScopeNone}
		entry, err := e.Submit(ctx, req)
		if errors.Is(err, backpressure.ErrAtCapacity) {
			refused = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if entry != contracts.StageRequested {
			t.Fatalf("turn %d entered at %s with APTIX over its admission mark", i, entry)
		}
	}
	if !refused {
		t.Fatal("the full queue refused nothing")
	}
	if _, q := e.Entered(); q == 0 {
		t.Error("Entered() counts no turn queued for lack of room")
	}
}
