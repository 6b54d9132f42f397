package stage_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

// TestChargedAtTheServingBackendsPrice: a turn enveloped for one backend
// and sent to another (a replay with --backend keeps the original
// envelope's price) is charged at the price of the backend that serves it;
// it was charged at the original model's.
func TestChargedAtTheServingBackendsPrice(t *testing.T) {
	sb := sandbox.New(sandbox.Options{})
	defer sb.Close()
	hs := httptest.NewServer(sb)
	defer hs.Close()
	set := &profiles.Set{}
	for name, perMillion := range map[string]float64{"cheap": 1, "dear": 1000} {
		set.Put(profiles.Profile{Name: name, BaseURL: hs.URL + "/v1", DefaultModel: "sandbox-1", Sandbox: true, MaxRetries: 1,
			Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative},
			Prices:       profiles.Prices{"*": {Input: perMillion, Output: perMillion}}})
	}
	set.Default = "cheap"
	cheap, _ := set.Get("cheap")
	l := &stage.LLMCaller{Caller: caller.New(set, caller.Options{})}
	turn := &contracts.Turn{ConversationId: "c-price", TurnId: "t-price",
		Request: contracts.AgentExecuteRequest{ConversationId: "c-price", TurnId: "t-price", Instruction: "hi"},
		Envelope: &contracts.Envelope{Backend: "dear", Model: "sandbox-1", Body: []byte(`{"model":"sandbox-1","input":"hi"}`),
			Price: cheap.Price("sandbox-1")}}
	if err := l.Handle(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	if turn.LLM == nil || turn.LLM.Error != nil {
		t.Fatalf("the call failed: %+v", turn.LLM)
	}
	if p := turn.Envelope.Price; p == nil || p.Input != 1000 || p.Output != 1000 {
		t.Fatalf("charged at %+v, want the serving backend's 1000/M", p)
	}
}
