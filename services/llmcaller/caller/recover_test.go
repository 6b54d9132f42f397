package caller_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestRecoverLostResponse: a backend that threads by
// previous_response_id restarts and forgets the response a conversation
// continues from. The next turn is sent again with the conversation's
// items (rebuilt from its logged calls, as the stage reads them from the
// events) as input, once, and says so in its warnings; without them the
// error says how to start over.
func TestRecoverLostResponse(t *testing.T) {
	var current atomic.Pointer[sandbox.Server]
	current.Store(sandbox.New(sandbox.Options{Logger: quiet}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.SupportsPreviousResponseID = true })
	calls := &callLog{}
	c := calls.wrap(caller.New(set, caller.Options{Logger: quiet, History: caller.NewMemHistoryStore(), Calls: calls}))
	ctx := context.Background()

	turn1 := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "t1", Body: requestBody(t, map[string]any{"input": []any{
		message("system", "You are the boot prompt."), message("user", "First question")}})})
	id1 := responseID(t, turn1.Body)
	turn2 := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "t2", Body: requestBody(t, map[string]any{"previous_response_id": id1, "input": "Second question"})})
	if turn2.Error != nil {
		t.Fatal(turn2.Error)
	}
	id2 := responseID(t, turn2.Body)

	fresh := sandbox.New(sandbox.Options{Logger: quiet}) // the backend restarted: it knows neither id
	current.Store(fresh)
	turn3 := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "t3", Body: requestBody(t, map[string]any{"previous_response_id": id2, "input": "Third question"})})
	if turn3.Error != nil {
		t.Fatalf("not recovered: %+v", turn3.Error)
	}
	if len(turn3.Warnings) != 1 || !strings.Contains(turn3.Warnings[0], id2) || !strings.Contains(turn3.Warnings[0], "conv") {
		t.Fatalf("warnings %q", turn3.Warnings)
	}
	var sent struct {
		Prev  string `json:"previous_response_id"`
		Input []struct {
			Role string `json:"role"`
		} `json:"input"`
	}
	if err := json.Unmarshal(fresh.LastRequest(), &sent); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, it := range sent.Input {
		roles = append(roles, it.Role)
	}
	if sent.Prev != "" || strings.Join(roles, ",") != "system,user,assistant,user,assistant,user" || fresh.Requests() != 2 {
		t.Fatalf("recovery sent previous_response_id %q, roles %v, after %d requests", sent.Prev, roles, fresh.Requests())
	}
	// The recovered turn is threaded normally from then on.
	id3 := responseID(t, turn3.Body)
	turn4 := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "t4", Body: requestBody(t, map[string]any{"previous_response_id": id3, "input": "Fourth"})})
	if turn4.Error != nil || len(turn4.Warnings) != 0 || !strings.Contains(outputText(t, turn4.Body), "Continuing from "+id3) {
		t.Fatalf("turn 4: %+v %q", turn4.Error, turn4.Warnings)
	}

	// Nothing kept: the error names the conversation and how to start over.
	bare := caller.New(set, caller.Options{Logger: quiet})
	res := bare.Call(ctx, caller.Input{ConversationID: "conv-x", TurnID: "t5", Body: requestBody(t, map[string]any{"previous_response_id": "resp_gone", "input": "hi"})})
	if res.Error == nil || res.Error.Code != "previous_response_not_found" || !strings.Contains(res.Error.Message, `conversation "conv-x"`) || !strings.Contains(res.Error.Message, "new conversation") {
		t.Fatalf("unrecoverable: %+v", res.Error)
	}
}

// TestRecoverFromOldRecords: records earlier releases kept per turn in the
// history store are still followed where the conversation's calls end:
// here the newest call is logged (its result rewritten by tool emulation,
// so its verbatim upstream body is what the model said), the two before it
// are only in old records.
func TestRecoverFromOldRecords(t *testing.T) {
	ts, fresh := startSandbox(t, sandbox.Options{}) // knows none of the ids below
	set := profileSet(ts.URL, nil)
	item := func(v map[string]any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	said := func(text string) map[string]any {
		return map[string]any{"type": "message", "role": "assistant", "content": []map[string]string{{"type": "output_text", "text": text}}}
	}
	old := caller.NewMemHistoryStore()
	ctx := context.Background()
	if err := old.Put(ctx, "resp_old1", []json.RawMessage{item(message("system", "boot")), item(message("user", "one")), item(said("first answer"))}); err != nil {
		t.Fatal(err)
	}
	if err := old.Put(ctx, "resp_old2", []json.RawMessage{item(map[string]any{"type": "aptix_previous_response", "id": "resp_old1"}),
		item(message("user", "two")), item(said("second answer"))}); err != nil {
		t.Fatal(err)
	}
	calls := &callLog{}
	verbatim, _ := json.Marshal(map[string]any{"id": "resp_new3", "output": []any{said("third answer")}})
	rewritten, _ := json.Marshal(map[string]any{"id": "resp_new3", "output": []any{said("REWRITTEN")}})
	calls.add("conv", caller.LoggedCall{Backend: "sb", Body: requestBody(t, map[string]any{"previous_response_id": "resp_old2", "input": "three"}),
		Result: contracts.LLMResult{Status: 200, Body: string(rewritten), UpstreamBody: string(verbatim)}})
	c := caller.New(set, caller.Options{Logger: quiet, History: old, Calls: calls})
	res := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "t4", Body: requestBody(t, map[string]any{"previous_response_id": "resp_new3", "input": "four"})})
	if res.Error != nil || len(res.Warnings) != 1 {
		t.Fatalf("not recovered: %+v %q", res.Error, res.Warnings)
	}
	var sent struct {
		Prev  string            `json:"previous_response_id"`
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(fresh.LastRequest(), &sent); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range sent.Input {
		var m struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(it, &m); err != nil || len(m.Content) == 0 {
			t.Fatalf("item %s", it)
		}
		texts = append(texts, m.Role+":"+m.Content[0].Text)
	}
	want := "system:boot user:one assistant:first answer user:two assistant:second answer user:three assistant:third answer user:four"
	if sent.Prev != "" || strings.Join(texts, " ") != want {
		t.Fatalf("recovered input %q (previous_response_id %q), want %q", strings.Join(texts, " "), sent.Prev, want)
	}
}
