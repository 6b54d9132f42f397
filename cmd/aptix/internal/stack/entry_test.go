package stack

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// delivered is how many events a stage's consumer was ever handed.
func (e *env) delivered(stage string) uint64 {
	e.t.Helper()
	st, _ := layout.StageByName(stage)
	stream, durable := st.Consumer()
	c, err := e.js.Consumer(context.Background(), stream, durable)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Delivered.Consumer
}

// TestGatewayTurnSkipsTheRetriever: a transparent HTTP turn that starts its
// conversation (no aptix extension, no file_search, no retrieval alias, no
// tools) never reaches the retriever nor the envelope, neither their queue
// nor their consumers: its first stored event is the enveloped event the
// gateway wrote, marked aptix-skipped: retriever,envelope, and no event of
// the conversation claims to be theirs. A continuation of it (the envelope
// reads the conversation's record) and a turn with a function tool skip
// the retriever only; a turn with retrieval (file_search) visits both, and
// so does an execute event a client publishes on the bus.
func TestGatewayTurnSkipsTheRetriever(t *testing.T) {
	var searches atomic.Int64
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Searcher = retrieverstage.SearchFunc(func(_ context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
			searches.Add(1)
			return contracts.Retrieval{Index: req.WorkspaceId, Chunks: []contracts.RagChunk{{Id: "ck", Path: "a.go", Content: "x"}}}, nil
		})
	})
	_, oc := e.gateway()
	ctx := ctxT(t)
	first, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := e.lastTurn()
	conv, turn := t0.ConversationId, t0.TurnId
	if r, en := e.delivered("retriever"), e.delivered("envelope"); r != 0 || en != 0 || searches.Load() != 0 {
		t.Fatalf("a transparent turn reached the retriever or the envelope: %d, %d deliveries, %d searches", r, en, searches.Load())
	}
	v, err := history.LoadTurn(ctx, e.js, conv, turn)
	if err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); !slices.Equal(sk, []string{"retriever", "envelope"}) {
		t.Fatalf("skipped %v, want [retriever envelope]", sk)
	}
	if _, ok := v.Msgs[contracts.StageRetrieved]; ok {
		t.Error("a turn that skipped the retriever and the envelope has a retrieved event")
	}
	if w := history.Writer(contracts.StageEnveloped, v.Msgs[contracts.StageEnveloped].Header); w != "gateway" {
		t.Errorf("the entry event's writer %q, want gateway", w)
	}
	if env := v.Turns[contracts.StageEnveloped].Envelope; env == nil || env.Backend != "sandbox" ||
		!strings.HasPrefix(string(env.Body), `{"model":"sandbox-1","input":[{`) || !strings.Contains(string(env.Body), `"hello"`) {
		t.Errorf("the entry event's envelope %+v", env)
	}
	evs, err := history.ConversationEvents(ctx, e.js, conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if src := ev.Header[contracts.HeaderCESource]; len(src) > 0 && (src[0] == "aptix/retriever" || src[0] == "aptix/envelope") {
			t.Errorf("event %d (%s) claims %s wrote it", ev.Seq, ev.Subject, src[0])
		}
	}

	// A continuation: the envelope reads the record, the retriever is skipped.
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")}}); err != nil {
		t.Fatal(err)
	}
	t1 := e.lastTurn()
	if v, err = history.LoadTurn(ctx, e.js, t1.ConversationId, t1.TurnId); err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); !slices.Equal(sk, []string{"retriever"}) || e.delivered("envelope") != 1 {
		t.Fatalf("a continuation: skipped %v, %d envelope deliveries", sk, e.delivered("envelope"))
	}
	if env := v.Turns[contracts.StageEnveloped].Envelope; env == nil || !strings.Contains(string(env.Body), `"previous_response_id"`) {
		t.Errorf("a continuation's body continues nothing: %+v", env)
	}

	// A function tool: through the envelope.
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("call it")},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "lookup", Parameters: map[string]any{"type": "object"}}}}}); err != nil {
		t.Fatal(err)
	}
	t2 := e.lastTurn()
	if v, err = history.LoadTurn(ctx, e.js, t2.ConversationId, t2.TurnId); err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); !slices.Equal(sk, []string{"retriever"}) || e.delivered("envelope") != 2 {
		t.Fatalf("a turn with tools: skipped %v, %d envelope deliveries", sk, e.delivered("envelope"))
	}

	// Retrieval asked for: the retriever runs.
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("where?")},
		Tools: []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{"aptix"}}}}}); err != nil {
		t.Fatal(err)
	}
	t3 := e.lastTurn()
	conv, turn = t3.ConversationId, t3.TurnId
	if v, err = history.LoadTurn(ctx, e.js, conv, turn); err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); len(sk) != 0 || searches.Load() != 1 || e.delivered("retriever") != 1 || e.delivered("envelope") != 3 {
		t.Fatalf("a file_search turn: skipped %v, %d searches, %d deliveries", sk, searches.Load(), e.delivered("retriever"))
	}
	if w := history.Writer(contracts.StageRetrieved, v.Msgs[contracts.StageRetrieved].Header); w != "retriever" {
		t.Errorf("a file_search turn's retrieved event is from %q", w)
	}

	// An execute event on the bus with retrieval: through the retriever.
	e.turn(contracts.AgentExecuteRequest{ConversationId: "c-bus", TurnId: "t1", Instruction: "with context"})
	if searches.Load() != 2 || e.delivered("retriever") != 2 || e.delivered("envelope") != 4 {
		t.Fatalf("an execute event with retrieval: %d searches, %d deliveries", searches.Load(), e.delivered("retriever"))
	}
	e.settled()
}

// TestSkippedTurnInvalidRequest: a request that would skip the retriever
// but is invalid is queued for the retriever, which answers it
// invalid_request as it always has (the entrance never stores an invalid
// request past the stage that validates it).
func TestSkippedTurnInvalidRequest(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	en, err := pipeline.NewEntrance(e.nc, e.cfg.Stream, "gateway", pipeline.Skipping{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	req := contracts.AgentExecuteRequest{ConversationId: "c-bad", TurnId: "t1", Instruction: "ok", RagScope: contracts.RagScopeNone, MaxOutputTokens: -5}
	entry, err := en.Submit(ctx, req)
	if err != nil || entry != contracts.StageRequested {
		t.Fatalf("Submit = %q, %v; want %s", entry, err, contracts.StageRequested)
	}
	got := e.await(ctx, "c-bad", "t1")
	if got.Failure == nil || got.Failure.Code != pipeline.CodeInvalidRequest || got.Failure.Stage != "retriever" {
		t.Fatalf("failure %+v, want the retriever's invalid_request", got.Failure)
	}
	if e.sb.Requests() != 0 {
		t.Fatalf("%d model calls for an invalid request", e.sb.Requests())
	}
	s, _ := e.js.Stream(ctx, contracts.StreamName)
	if _, err := s.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageRetrieved, "c-bad", "t1")); err != jetstream.ErrMsgNotFound {
		t.Fatalf("an invalid request has a retrieved event: %v", err)
	}
}
