package caller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// A turn sent to the sandbox, then redelivered: the second Call is served
// from the pay-once store without calling the backend.
func ExampleCaller_Call() {
	quiet := slog.New(slog.DiscardHandler)
	ts := httptest.NewServer(sandbox.New(sandbox.Options{Logger: quiet}))
	defer ts.Close()
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", BaseURL: ts.URL + "/v1", Sandbox: true,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true}})
	set.Default = "sandbox"
	c := caller.New(set, caller.Options{Results: caller.NewMemResultStore(), Logger: quiet})

	in := caller.Input{ConversationID: "conv-1", TurnID: "turn-1", Body: json.RawMessage(`{"model":"sandbox-1","input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: EXPLAIN]\n\n[INSTRUCTION]\nExplain the invoice flow"}]}]}`)}
	res := c.Call(context.Background(), in)
	var r struct {
		Output []struct {
			Content []struct{ Text string }
		}
	}
	if err := json.Unmarshal([]byte(res.Body), &r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, r.Output[0].Content[0].Text)
	fmt.Println("cached on redelivery:", c.Call(context.Background(), in).Cached)
	// Output:
	// 200 Sandbox reply (mode EXPLAIN) to: Explain the invoice flow. Context chunks: none.
	// cached on redelivery: true
}
