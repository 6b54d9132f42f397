package stage

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// holder records what the stage holds, and refuses when told to.
type holder struct {
	mu       sync.Mutex
	refuse   bool
	reserved map[string]spend.Hold
	settled  map[string]spend.Hold
	released []string
}

func (h *holder) Reserve(_ context.Context, _ string, b []contracts.Budget, id string, x spend.Hold) (*spend.Refusal, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse {
		return &spend.Refusal{Budget: b[0], Need: float64(x.Tokens)}, nil
	}
	h.reserved[id] = x
	return nil, nil
}

func (h *holder) Settle(_ context.Context, _ string, _ []contracts.Budget, id string, real spend.Hold) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settled[id] = real
	return nil
}

func (h *holder) Release(_ context.Context, _ string, _ []contracts.Budget, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = append(h.released, id)
	return nil
}

func budgetedStage(t *testing.T) (*LLMCaller, *holder, *sandbox.Server) {
	t.Helper()
	sb := sandbox.New(sandbox.Options{})
	hs := httptest.NewServer(sb)
	t.Cleanup(hs.Close)
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", BaseURL: hs.URL + "/v1", DefaultModel: "sandbox-1", Sandbox: true,
		AttemptTimeout: time.Second, TurnTimeout: 4 * time.Second, MaxRetries: 1, MaxConcurrent: 4,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative},
		// The serving backend's price is the turn's (TestChargedAtTheServingBackendsPrice).
		Prices: profiles.Prices{"*": {Input: 20, Output: 20}}})
	set.Default = "sandbox"
	h := &holder{reserved: map[string]spend.Hold{}, settled: map[string]spend.Hold{}}
	return &LLMCaller{Caller: caller.New(set, caller.Options{}), Budgets: h}, h, sb
}

func budgetedTurn(round int) *contracts.Turn {
	t := &contracts.Turn{ConversationId: "c1", TurnId: "t1",
		Request: contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "hello", Principal: "key:a",
			Budgets: []contracts.Budget{{USD: 1, Period: contracts.PeriodDay}}},
		Envelope: &contracts.Envelope{Backend: "sandbox", Model: "sandbox-1", Price: &contracts.Price{Input: 20, Output: 20},
			Body: []byte(`{"model":"sandbox-1","input":"hello there, how much will this cost?","max_output_tokens":50}`)}}
	if round > 0 {
		t.Tools = &contracts.ToolLoop{Round: round}
	}
	return t
}

// TestToolRoundReservesAgain: every model call of a budgeted turn holds its
// worst case before the model is called, a tool loop's later round under
// its own call key as well as the first, and the hold is settled to the
// call's real cost after it. Before holds, only round 0 was checked.
func TestToolRoundReservesAgain(t *testing.T) {
	l, h, sb := budgetedStage(t)
	for _, round := range []int{0, 1} {
		turn := budgetedTurn(round)
		id := contracts.CallKey(turn)
		if err := l.Handle(context.Background(), turn); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, ok := h.reserved[id]
		if !ok {
			t.Fatalf("round %d reserved nothing under %s (%v)", round, id, h.reserved)
		}
		// Input counted locally (a dozen tokens) plus the 50 output tokens, at $20/M.
		if got.Tokens < 55 || got.Tokens > 80 || got.Nanos != got.Tokens*20_000 || got.Turn != "c1.t1" {
			t.Fatalf("round %d held %+v", round, got)
		}
		real, ok := h.settled[id]
		if !ok || !real.Settled || real.Tokens == 0 || real.Tokens >= got.Tokens || real.Nanos != real.Tokens*20_000 {
			t.Fatalf("round %d settled %+v (held %+v)", round, real, got)
		}
	}
	if sb.Requests() != 2 {
		t.Fatalf("%d model calls, want 2", sb.Requests())
	}
}

// TestRefusedRoundIsNotCalled: a call whose worst case does not fit is
// rejected with budget_exceeded before the model is called, in any round.
func TestRefusedRoundIsNotCalled(t *testing.T) {
	l, h, sb := budgetedStage(t)
	h.refuse = true
	err := l.Handle(context.Background(), budgetedTurn(2))
	var rej *pipeline.Rejection
	if !errors.As(err, &rej) || rej.Code != CodeBudgetExceeded {
		t.Fatalf("a refused round: %v", err)
	}
	if sb.Requests() != 0 {
		t.Fatal("the model was called for a refused round")
	}
}
