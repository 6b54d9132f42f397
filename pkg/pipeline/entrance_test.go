package pipeline

import (
	"context"
	"encoding/json"
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
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// transparent is a transparent HTTP turn as the gateway prepares it for a
// new conversation: no retrieval, a backend, input items and nothing else.
func transparent(edit func(*contracts.AgentExecuteRequest)) contracts.AgentExecuteRequest {
	r := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone,
		Framing: contracts.FramingNone, NewConversation: true, AgentContext: &contracts.AgentContext{Backend: "sandbox", Model: "sandbox-1"},
		OpenAI: &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"role":"user","content":"hi"}]`)}}
	edit(&r)
	return r
}

// TestEntryOf: a valid request with no retrieval (ragScope none: every
// transparent HTTP turn, an execute event that asks for none) enters past
// the retriever; one that retrieves, leaves the scope to the default, or is
// invalid enters at aptix.requested, where the retriever searches or answers
// it invalid_request. A transparent turn that starts its conversation and
// asks for nothing the envelope adds enters past the envelope too, where
// the envelope's settings are known (profiles, no MCP default-all); any
// request that needs the envelope's work stops before it.
func TestEntryOf(t *testing.T) {
	ok := func(edit func(*contracts.AgentExecuteRequest)) contracts.AgentExecuteRequest {
		r := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone}
		edit(&r)
		return r
	}
	known := Skipping{Profiles: profiles.Builtin()}
	none := func(*contracts.AgentExecuteRequest) {}
	for _, c := range []struct {
		name string
		req  contracts.AgentExecuteRequest
		s    Skipping
		want string
	}{
		{"no retrieval", ok(none), known, contracts.StageRetrieved},
		{"transparent, no profiles", transparent(none), Skipping{}, contracts.StageRetrieved},
		{"transparent", transparent(none), known, contracts.StageEnveloped},
		{"transparent with fields and instructions", transparent(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Fields, r.OpenAI.Instructions, r.MaxOutputTokens = json.RawMessage(`{"temperature":0}`), "be brief", 50
		}), known, contracts.StageEnveloped},
		{"transparent, a branch of another conversation", transparent(func(r *contracts.AgentExecuteRequest) { r.ResponseContinuationId = "resp_up" }), known, contracts.StageEnveloped},
		{"transparent, budgets with a limit", transparent(func(r *contracts.AgentExecuteRequest) {
			r.Budgets, r.MaxOutputTokens = []contracts.Budget{{Period: "day", USD: 1}}, 100
		}), known, contracts.StageEnveloped},
		{"MCP default-all", transparent(none), Skipping{Profiles: profiles.Builtin(), MCPDefaultAll: true}, contracts.StageRetrieved},
		{"framed", transparent(func(r *contracts.AgentExecuteRequest) { r.Framing = "" }), known, contracts.StageRetrieved},
		{"framed agn003", transparent(func(r *contracts.AgentExecuteRequest) { r.Framing = contracts.FramingAGN003 }), known, contracts.StageRetrieved},
		{"continues its conversation", transparent(func(r *contracts.AgentExecuteRequest) { r.NewConversation = false }), known, contracts.StageRetrieved},
		{"tools", transparent(func(r *contracts.AgentExecuteRequest) { r.ToolsJson = `[{"type":"function","name":"f"}]` }), known, contracts.StageRetrieved},
		{"tool choice", transparent(func(r *contracts.AgentExecuteRequest) { r.ToolChoiceName = "none" }), known, contracts.StageRetrieved},
		{"conversation context", transparent(func(r *contracts.AgentExecuteRequest) {
			r.ConversationContext = &contracts.ConversationContext{DefaultModel: "m"}
		}), known, contracts.StageRetrieved},
		{"conversation context id", transparent(func(r *contracts.AgentExecuteRequest) { r.ConversationContextId = "ddr" }), known, contracts.StageRetrieved},
		{"budgets without a limit", transparent(func(r *contracts.AgentExecuteRequest) { r.Budgets = []contracts.Budget{{Period: "day", USD: 1}} }), known, contracts.StageRetrieved},
		{"no backend named", transparent(func(r *contracts.AgentExecuteRequest) { r.AgentContext.Backend = "" }), known, contracts.StageRetrieved},
		{"no agent context", transparent(func(r *contracts.AgentExecuteRequest) { r.AgentContext = nil }), known, contracts.StageRetrieved},
		{"no passthrough", transparent(func(r *contracts.AgentExecuteRequest) { r.OpenAI = nil }), known, contracts.StageRetrieved},
		{"no input", transparent(func(r *contracts.AgentExecuteRequest) { r.OpenAI.Input = nil }), known, contracts.StageRetrieved},
		{"whole history", transparent(func(r *contracts.AgentExecuteRequest) { r.OpenAI.WholeHistory = true }), known, contracts.StageRetrieved},
		{"an approval answer", transparent(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Input = json.RawMessage(`[{"type":"mcp_approval_response","approval_request_id":"a","approve":true}]`)
		}), known, contracts.StageRetrieved},
		{"an escaped approval answer", transparent(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Input = json.RawMessage(`[{"type":"\u006dcp_approval_response","approval_request_id":"a","approve":true}]`)
		}), known, contracts.StageRetrieved},
		{"an escaped <", transparent(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Input = json.RawMessage(`[{"role":"user","content":"a \u003c b"}]`)
		}), known, contracts.StageEnveloped},
		{"transparent with retrieval", transparent(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeWorkspace }), known, contracts.StageRequested},
		{"default scope retrieves", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = "" }), known, contracts.StageRequested},
		{"workspace", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeWorkspace }), known, contracts.StageRequested},
		{"repo", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeRepo }), known, contracts.StageRequested},
		{"active files", ok(func(r *contracts.AgentExecuteRequest) { r.RagScope = contracts.RagScopeActiveFiles }), known, contracts.StageRequested},
		{"invalid: no instruction", ok(func(r *contracts.AgentExecuteRequest) { r.Instruction = " " }), known, contracts.StageRequested},
		{"invalid: bad id", ok(func(r *contracts.AgentExecuteRequest) { r.TurnId = "a.b" }), known, contracts.StageRequested},
		{"invalid: framing", ok(func(r *contracts.AgentExecuteRequest) { r.Framing = "xml" }), known, contracts.StageRequested},
		{"invalid transparent", transparent(func(r *contracts.AgentExecuteRequest) { r.MaxOutputTokens = -1 }), known, contracts.StageRequested},
	} {
		if got := EntryOf(c.req, c.s); got != c.want {
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
	e, err := NewEntrance(nc, layout.StreamConfig{}, "test", Skipping{})
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
	e, err := NewEntrance(nc, c, "test", Skipping{})
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

// TestEntranceSkipsTheEnvelope: a transparent turn that needs nothing of
// the envelope is stored once, as its enveloped event, with the envelope's
// Nats-Msg-Id, both stages marked skipped and the envelope's section built
// (backend, model, body); nothing is queued and no retrieved event exists.
// The same request sent again is in already; another request under its
// turn id is refused turn_id_reused at either entry point, and a turn id
// used at aptix.retrieved is refused at aptix.enveloped.
func TestEntranceSkipsTheEnvelope(t *testing.T) {
	nc, js := natstest.JetStream(t)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	e, err := NewEntrance(nc, layout.StreamConfig{}, "test", Skipping{Profiles: profiles.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	req := transparent(func(*contracts.AgentExecuteRequest) {})
	entry, err := e.Submit(ctx, req)
	if err != nil || entry != contracts.StageEnveloped {
		t.Fatalf("Submit = %q, %v; want %s", entry, err, contracts.StageEnveloped)
	}
	m, tu := entryEvent(t, js, contracts.StageEnveloped, "c1", "t1")
	if got := m.Header.Get(contracts.HeaderSkipped); got != "retriever,envelope" {
		t.Errorf("%s = %q, want retriever,envelope", contracts.HeaderSkipped, got)
	}
	if got, want := m.Header.Get(contracts.HeaderMsgID), contracts.MsgID("c1", "t1", contracts.StageEnveloped); got != want {
		t.Errorf("Nats-Msg-Id %q, want the envelope's own %q", got, want)
	}
	if got := m.Header.Get(contracts.HeaderCEType); got != contracts.CEType(contracts.StageEnveloped) {
		t.Errorf("ce-type %q", got)
	}
	if tu.Envelope == nil || tu.Envelope.Backend != "sandbox" || tu.Envelope.Model != "sandbox-1" ||
		string(tu.Envelope.Body) != `{"model":"sandbox-1","input":[{"role":"user","content":"hi"}]}` {
		t.Fatalf("envelope section %+v", tu.Envelope)
	}
	if tu.Retrieval == nil || tu.Retrieval.Scope != contracts.RagScopeNone || tu.Retrieval.Chunks != nil {
		t.Errorf("retrieval section %+v", tu.Retrieval)
	}
	s, _ := js.Stream(ctx, contracts.StreamName)
	if _, err := s.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageRetrieved, "c1", "t1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a turn that skipped the retriever has a retrieved event: %v", err)
	}
	if n := queued(t, js); n != 0 {
		t.Errorf("%d requests queued", n)
	}

	// Sent again: in already, stored once.
	if entry, err := e.Submit(ctx, req); err != nil || entry != contracts.StageEnveloped {
		t.Fatalf("the same turn sent again: %q, %v", entry, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.TurnFilter("c1", "t1")))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d events for one turn sent twice", info.State.Msgs)
	}
	// Another request under the same turn id: refused, whether it would
	// enter at aptix.enveloped or at aptix.retrieved (framed).
	other := req
	other.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"role":"user","content":"else"}]`)}
	if _, err := e.Submit(ctx, other); !errors.Is(err, client.ErrTurnIDReused) {
		t.Errorf("a reused turn id at enveloped: %v, want ErrTurnIDReused", err)
	}
	framed := req
	framed.Framing = contracts.FramingAGN003
	if EntryOf(framed, e.skip) != contracts.StageRetrieved {
		t.Fatal("a framed request does not enter at retrieved")
	}
	if _, err := e.Submit(ctx, framed); !errors.Is(err, client.ErrTurnIDReused) {
		t.Errorf("a turn id used at enveloped, reused at retrieved: %v, want ErrTurnIDReused", err)
	}
	// The other way round: a turn id used at aptix.retrieved.
	framed.TurnId = "t2"
	if entry, err := e.Submit(ctx, framed); err != nil || entry != contracts.StageRetrieved {
		t.Fatalf("a framed turn: %q, %v", entry, err)
	}
	again := req
	again.TurnId = "t2"
	if _, err := e.Submit(ctx, again); !errors.Is(err, client.ErrTurnIDReused) {
		t.Errorf("a turn id used at retrieved, reused at enveloped: %v, want ErrTurnIDReused", err)
	}

	// A body the envelope is to answer (input that is no JSON array) is
	// queued for it, counted as queued.
	bad := req
	bad.TurnId = "t3"
	bad.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(`{"role":"user"}`)}
	if entry, err := e.Submit(ctx, bad); err != nil || entry != contracts.StageRequested {
		t.Fatalf("an unbuildable body: %q, %v; want %s", entry, err, contracts.StageRequested)
	}
	by, q := e.Entered()
	if by[contracts.StageEnveloped] != 2 || by[contracts.StageRetrieved] != 1 || by[contracts.StageRequested] != 1 || q != 1 {
		t.Errorf("Entered() = %v, %d", by, q)
	}
}
