package stack

import (
	"context"
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

// retrieverDelivered is how many events the retriever's consumer was ever
// handed.
func (e *env) retrieverDelivered() uint64 {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), contracts.QueueStreamName, layout.Durable("retriever"))
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Delivered.Consumer
}

// TestGatewayTurnSkipsTheRetriever: a transparent HTTP turn (no aptix
// extension, no file_search, no retrieval alias) never reaches the
// retriever, neither its queue nor its consumer: its first stored event is
// the retrieved event the gateway wrote, marked aptix-skipped: retriever,
// and no event of the conversation claims to be the retriever's. A turn
// with retrieval (file_search) still visits the retriever, and so does an
// execute event a client publishes on the bus.
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
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}); err != nil {
		t.Fatal(err)
	}
	t0 := e.lastTurn()
	conv, turn := t0.ConversationId, t0.TurnId
	if n := e.retrieverDelivered(); n != 0 || searches.Load() != 0 {
		t.Fatalf("a transparent turn reached the retriever: %d deliveries, %d searches", n, searches.Load())
	}
	v, err := history.LoadTurn(ctx, e.js, conv, turn)
	if err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); len(sk) != 1 || sk[0] != "retriever" {
		t.Fatalf("skipped %v, want [retriever]", sk)
	}
	if w := history.Writer(contracts.StageRetrieved, v.Msgs[contracts.StageRetrieved].Header); w != "gateway" {
		t.Errorf("the entry event's writer %q, want gateway", w)
	}
	evs, err := history.ConversationEvents(ctx, e.js, conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if src := ev.Header[contracts.HeaderCESource]; len(src) > 0 && src[0] == "aptix/retriever" {
			t.Errorf("event %d (%s) claims the retriever wrote it", ev.Seq, ev.Subject)
		}
	}

	// Retrieval asked for: the retriever runs.
	if _, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("where?")},
		Tools: []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{"aptix"}}}}}); err != nil {
		t.Fatal(err)
	}
	t1 := e.lastTurn()
	conv, turn = t1.ConversationId, t1.TurnId
	if v, err = history.LoadTurn(ctx, e.js, conv, turn); err != nil {
		t.Fatal(err)
	}
	if sk := v.Skipped(); len(sk) != 0 || searches.Load() != 1 || e.retrieverDelivered() != 1 {
		t.Fatalf("a file_search turn: skipped %v, %d searches, %d deliveries", sk, searches.Load(), e.retrieverDelivered())
	}
	if w := history.Writer(contracts.StageRetrieved, v.Msgs[contracts.StageRetrieved].Header); w != "retriever" {
		t.Errorf("a file_search turn's retrieved event is from %q", w)
	}

	// An execute event on the bus with retrieval: through the retriever.
	e.turn(contracts.AgentExecuteRequest{ConversationId: "c-bus", TurnId: "t1", Instruction: "with context"})
	if searches.Load() != 2 || e.retrieverDelivered() != 2 {
		t.Fatalf("an execute event with retrieval: %d searches, %d deliveries", searches.Load(), e.retrieverDelivered())
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
