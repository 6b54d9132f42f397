package pipeline

import (
	"context"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
)

// The runtime's own cost per event, without a server: decode, trace,
// handler call, encode, publish into memory. The bus round trips are
// measured by make bench; these keep the runtime's share from growing.

// BenchmarkHandleRequest is the first stage's event: a bare request, its
// output published only if the turn has no event yet.
func BenchmarkHandleRequest(b *testing.B) {
	r, js := memRunner(Stage{Name: "bench", In: contracts.StageRequested, Out: contracts.StageRetrieved,
		Handle: func(_ context.Context, t *contracts.Turn) error {
			t.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{}}
			return nil
		}}, SubscriberConfig{})
	payload := []byte(`{"conversationId":"c1","turnId":"t1","instruction":"write a decision record about the cache","mode":"sync"}`)
	subject := contracts.Subject(contracts.StageRequested, "c1", "t1")
	js.discard = true
	b.ReportAllocs()
	for b.Loop() {
		if err := r.handle(delivery(subject, 1, payload)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandleTurn is a later stage's event: a Turn in, the next one out.
func BenchmarkHandleTurn(b *testing.B) {
	r, js := memRunner(Stage{Name: "bench", In: contracts.StageRetrieved, Out: contracts.StageEnveloped,
		Handle: func(_ context.Context, t *contracts.Turn) error {
			t.Envelope = &contracts.Envelope{Body: []byte(`{"model":"m","input":"write a decision record about the cache"}`)}
			return nil
		}}, SubscriberConfig{})
	turn := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "write a decision record about the cache"})
	turn.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{{Id: "k1", Path: "internal/cache/cache.go", StartLine: 1, EndLine: 3, Content: "caches keep what was read"}}}
	payload, err := turncodec.Marshal(&turn)
	if err != nil {
		b.Fatal(err)
	}
	subject := contracts.Subject(contracts.StageRetrieved, "c1", "t1")
	js.discard = true
	b.ReportAllocs()
	for b.Loop() {
		if err := r.handle(delivery(subject, 1, payload)); err != nil {
			b.Fatal(err)
		}
	}
}
