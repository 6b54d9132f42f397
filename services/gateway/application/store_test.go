package application

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestHeadWithoutWriteAtCreation: a new conversation writes no head, and
// fork detection still holds. Of concurrent continuations of its first
// response exactly one continues the conversation (it creates the head);
// the others, and any later continuation of that first response, branch;
// the winner's own continuation moves the head on. A response that did not
// start its conversation (a named one's, or a continuation) is not taken
// for its first, and without a head written it is not the head.
func TestHeadWithoutWriteAtCreation(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	st, err := OpenStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	turn := "0190a0b0-0000-7000-8000-000000000001"
	first := &responses.Meta{ID: "resp_first", TurnID: turn, ConversationID: firstConversation(turn)}
	if !startsConversation(first) {
		t.Fatal("a response in the conversation named after its turn starts it")
	}
	conv := first.ConversationID

	const n = 8
	won := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, _, err := st.claimFirst(ctx, conv, fmt.Sprintf("resp_c%d", i))
			if err != nil {
				t.Error(err)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	winner := -1
	for i, ok := range won {
		if ok && winner >= 0 {
			t.Fatalf("continuations %d and %d of the same response both continued its conversation", winner, i)
		}
		if ok {
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no continuation of the conversation's first response continued it")
	}
	// The first response is no longer the head: continuing it again branches.
	if ok, _, err := st.claimFirst(ctx, conv, "resp_late"); ok || err != nil {
		t.Fatalf("a late continuation of the first response claimed the head (%v, %v)", ok, err)
	}
	// The winner is the head: its continuation moves it.
	ok, rev, err := st.claimHead(ctx, conv, fmt.Sprintf("resp_c%d", winner), "resp_next")
	if !ok || err != nil || rev == 0 {
		t.Fatalf("continuing the head: %v, rev %d, %v", ok, rev, err)
	}
	if ok, _, err := st.ClaimHeadAt(ctx, conv, "resp_after", rev); !ok || err != nil {
		t.Fatalf("continuing the head at its revision: %v, %v", ok, err)
	}

	// Without a head, only the first response is the head.
	other := "0190a0b0-0000-7000-8000-000000000002"
	for _, m := range []*responses.Meta{
		{ID: "resp_named", TurnID: other, ConversationID: firstConversation(other), NamedConversation: "c-" + other},
		{ID: "resp_cont", TurnID: other, ConversationID: firstConversation(turn)},
	} {
		if startsConversation(m) {
			t.Fatalf("%s taken for its conversation's first response", m.ID)
		}
	}
	if ok, _, err := st.claimHead(ctx, "named-conv", "resp_named", "resp_x"); ok || err != nil {
		t.Fatalf("no head and not the first response: claimed (%v, %v)", ok, err)
	}
}
