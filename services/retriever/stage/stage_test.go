package stage

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
)

// TestSkippedTurnReadsAsRetrieved: a turn that skips the retriever
// (pipeline.EntryOf: ragScope none) carries exactly the retrieval section
// the retriever writes for it, with or without an index, so the stages
// after it cannot tell the two apart; and every request the retriever would
// answer invalid_request is one EntryOf sends to the retriever.
func TestSkippedTurnReadsAsRetrieved(t *testing.T) {
	req := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone}
	if got := pipeline.EntryOf(req, pipeline.Skipping{}); got != contracts.StageRetrieved {
		t.Fatalf("EntryOf = %s, want %s", got, contracts.StageRetrieved)
	}
	skipped := contracts.NewTurn(req)
	if err := pipeline.FillSkipped("retriever", &skipped, pipeline.Skipping{}); err != nil {
		t.Fatal(err)
	}
	searched := false
	for _, r := range []*Retriever{{}, {Searcher: SearchFunc(func(context.Context, contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
		searched = true
		return contracts.Retrieval{}, nil
	})}} {
		ran := contracts.NewTurn(req)
		if err := r.Handle(context.Background(), &ran); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ran, skipped) {
			t.Errorf("the retriever writes %+v, a skipped turn carries %+v", ran.Retrieval, skipped.Retrieval)
		}
	}
	if searched {
		t.Error("the retriever searched for a turn with ragScope none")
	}
	for _, bad := range []contracts.AgentExecuteRequest{
		{ConversationId: "c1", TurnId: "t1", Instruction: " ", RagScope: contracts.RagScopeNone},
		{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone, Framing: "xml"},
		{ConversationId: "c1", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone, MaxOutputTokens: -1},
	} {
		tu := contracts.NewTurn(bad)
		var rej *pipeline.Rejection
		if err := (&Retriever{}).Handle(context.Background(), &tu); !errors.As(err, &rej) || rej.Code != pipeline.CodeInvalidRequest {
			t.Fatalf("the retriever does not reject %+v: %v", bad, err)
		}
		if got := pipeline.EntryOf(bad, pipeline.Skipping{}); got != contracts.StageRequested {
			t.Errorf("an invalid request enters at %s, past the retriever that answers it invalid_request", got)
		}
	}
}
