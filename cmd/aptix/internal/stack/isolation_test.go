package stack

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// shortDedup sets a de-duplication window of one second through the
// environment (the stack reads APTIX_DEDUP_WINDOW as `aptix up` does) and
// returns how long to wait to be past it.
func shortDedup(t *testing.T) time.Duration {
	t.Setenv(layout.EnvDedupWindow, "1s")
	return 1500 * time.Millisecond
}

// checkDedupWindow fails unless both streams were created with the window.
func checkDedupWindow(t *testing.T, e *env, want time.Duration) {
	t.Helper()
	for _, name := range []string{contracts.QueueStreamName, contracts.StreamName} {
		s, err := e.js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != want {
			t.Fatalf("stream %s: de-duplication window %v, want %v (APTIX_DEDUP_WINDOW)", name, got, want)
		}
	}
}

// TestTurnIDScopedPerConversation: a turn's identity is its conversation
// and its turn id. The same turn id in another conversation is a new turn
// that completes with its own answer, within the de-duplication window
// (where it was silently dropped: no event, no completion) and past it
// (where it was answered with the first conversation's paid result: its
// text and upstream response id). In the same conversation a different
// request under the id is turn_id_reused, within the window and past it.
func TestTurnIDScopedPerConversation(t *testing.T) {
	past := shortDedup(t)
	e := newEnv(t, sandbox.Options{})
	checkDedupWindow(t, e, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ask := func(conv, text string) contracts.Turn {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		req := contracts.AgentExecuteRequest{ConversationId: conv, TurnId: "shared", Instruction: text, RagScope: contracts.RagScopeNone}
		if err := client.Submit(tctx, e.js, req); err != nil {
			t.Fatalf("%s: %v", conv, err)
		}
		got, err := client.Await(tctx, e.js, conv, "shared")
		if err != nil {
			t.Fatalf("conversation %s, turn shared: no completion (%v)", conv, err)
		}
		return got
	}
	own := func(what string, got, other contracts.Turn, text string) {
		t.Helper()
		r := got.Response
		if r == nil || r.Kind != contracts.KindOK || !strings.Contains(r.Text, text) {
			t.Fatalf("%s: %+v, want an answer to %q", what, r, text)
		}
		if strings.Contains(r.Text, "Alpha's") || got.LLM == nil || got.LLM.Cached {
			t.Fatalf("%s was answered from another conversation's result: %q (cached %v)", what, r.Text, got.LLM != nil && got.LLM.Cached)
		}
		if r.ResponseContinuationId == "" || r.ResponseContinuationId == other.Response.ResponseContinuationId {
			t.Fatalf("%s continues upstream response %q, the other conversation's is %q", what, r.ResponseContinuationId, other.Response.ResponseContinuationId)
		}
	}

	alpha := ask("alpha", "Alpha's secret question")
	if r := alpha.Response; r.Kind != contracts.KindOK || !strings.Contains(r.Text, "Alpha's secret question") {
		t.Fatalf("alpha: %+v", r)
	}
	// The same conversation, another request, within the window: refused.
	again := contracts.AgentExecuteRequest{ConversationId: "alpha", TurnId: "shared", Instruction: "another question", RagScope: contracts.RagScopeNone}
	if err := client.Submit(ctx, e.js, again); !errors.Is(err, client.ErrTurnIDReused) {
		t.Fatalf("a reused turn id within the window: %v", err)
	}
	// Another conversation within the window: a new turn of its own, at once.
	own("beta within the window", ask("beta", "Beta's question"), alpha, "Beta's question")
	// Past the window: still its own, never alpha's paid answer.
	time.Sleep(past)
	own("gamma past the window", ask("gamma", "Gamma's question"), alpha, "Gamma's question")
	if n := e.sb.Requests(); n != 3 {
		t.Fatalf("the model was called %d times for three conversations' turns, want 3", n)
	}

	// The same conversation, another request, past the window: answered
	// turn_id_reused, never silence.
	if err := client.Submit(ctx, e.js, again); err != nil {
		t.Fatalf("a reused turn id past the window: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := e.await(ctx, "alpha", "shared").Response
		if got.Kind == contracts.KindError {
			if got.ErrorCode != contracts.CodeTurnIDReused {
				t.Fatalf("a reused turn id past the window: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a reused turn id past the window was not answered turn_id_reused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.settled()
	if n := e.sb.Requests(); n != 3 {
		t.Fatalf("the model was called %d times, want 3 (a reused id is not called)", n)
	}
}

// TestTurnIDScopedPerPrincipal: over HTTP with API keys, Bob sends the turn
// ids of Alice's turns (the one she chose on /v1/aptix/execute, and the one
// her response id converts to) in his own conversation. Within the
// de-duplication window and past it, he gets his own fresh answer from the
// model, never Alice's text or upstream response id, and never silence.
func TestTurnIDScopedPerPrincipal(t *testing.T) {
	past := shortDedup(t)
	e := newEnv(t, sandbox.Options{})
	checkDedupWindow(t, e, time.Second)
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, _, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := keys.Create(ctx, "bob", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	gateway := func() string {
		return e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, func(c *httpapi.Config) { c.SyncTimeout = 10 * time.Second })
	}
	url := gateway()

	execute := func(url, key, body string) contracts.AgentExecuteResponse {
		t.Helper()
		st, _, b := call(t, http.MethodPost, url+"/v1/aptix/execute", body, bearer(key))
		var r contracts.AgentExecuteResponse
		if st != http.StatusOK || json.Unmarshal([]byte(b), &r) != nil {
			t.Fatalf("execute %s: %d %s", body, st, b)
		}
		return r
	}
	bobs := func(what string, r contracts.AgentExecuteResponse, text string, alices ...string) {
		t.Helper()
		if r.Kind != contracts.KindOK || !strings.Contains(r.Text, text) || strings.Contains(r.Text, "Alice") {
			t.Fatalf("%s: %+v, want Bob's own answer to %q", what, r, text)
		}
		for _, up := range alices {
			if r.ResponseContinuationId == up {
				t.Fatalf("%s continues Alice's upstream response %s", what, up)
			}
		}
	}

	// Alice's turns: one on /v1/aptix/execute with a turn id she chose, one
	// on /v1/responses whose response id converts to its turn id.
	mine := execute(url, alice, `{"conversationId":"notes","turnId":"t-chosen","instruction":"Alice's private note","ragScope":"none"}`)
	if mine.Kind != contracts.KindOK || !strings.Contains(mine.Text, "Alice's private note") {
		t.Fatalf("alice: %+v", mine)
	}
	ca := as(url, alice)
	// Alice herself sending another request under her turn id, within the
	// window: refused at once, as her mistake.
	st, _, b := call(t, http.MethodPost, url+"/v1/aptix/execute", `{"conversationId":"notes","turnId":"t-chosen","instruction":"another note","ragScope":"none"}`, bearer(alice))
	if st != http.StatusConflict || !strings.Contains(b, `"code":"turn_id_reused"`) || !strings.Contains(b, `"param":"turnId"`) {
		t.Fatalf("a reused turn id: %d %s", st, b)
	}
	r, err := ca.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Alice's secret plan")}})
	if err != nil || r.Status != responses.ResponseStatusCompleted {
		t.Fatalf("alice's response: %v", err)
	}
	aliceUp := e.lastUpstreamID()
	raw, err := hex.DecodeString(strings.TrimPrefix(r.ID, "resp_"))
	if err != nil || len(raw) != 16 {
		t.Fatalf("response id %s does not convert to a turn id", r.ID)
	}
	respTurn := uuid.UUID(raw).String()

	// Bob is served by another gateway replica, one that never saw Alice's
	// completions (a replica that had seen them dropped Bob's as their
	// duplicates before turn keys named the conversation).
	url = gateway()
	// Within the window: Bob's turn is a new one, answered at once.
	got := execute(url, bob, `{"conversationId":"notes","turnId":"t-chosen","instruction":"Bob's first question","ragScope":"none"}`)
	bobs("Bob's turn of Alice's chosen id, within the window", got, "Bob's first question", mine.ResponseContinuationId, aliceUp)

	// Past the window: Bob's own answer again, never Alice's.
	time.Sleep(past)
	got = execute(url, bob, `{"conversationId":"mine","turnId":"`+respTurn+`","instruction":"Bob's second question","ragScope":"none"}`)
	bobs("Bob's turn of Alice's response's turn id, past the window", got, "Bob's second question", mine.ResponseContinuationId, aliceUp)
	got = execute(url, bob, `{"conversationId":"other","turnId":"t-chosen","instruction":"Bob's third question","ragScope":"none"}`)
	bobs("Bob's turn of Alice's chosen id, past the window", got, "Bob's third question", mine.ResponseContinuationId, aliceUp)
	if n := e.sb.Requests(); n != 5 {
		t.Fatalf("the model was called %d times for 5 turns", n)
	}

	// Alice's response is still hers, unchanged.
	ca = as(url, alice)
	again, err := ca.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || !strings.Contains(again.OutputText(), "Alice's secret plan") {
		t.Fatalf("alice's response after Bob's turns: %v %q", err, again.OutputText())
	}
}

// TestWebhookOnlyForItsOwnTurn: a turn of another conversation that took a
// response's turn id (a client may choose it on /v1/aptix/execute) is not
// that response's completion: it sends no webhook to the response's
// receiver.
func TestWebhookOnlyForItsOwnTurn(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 0)
	wc := &application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: 100 * time.Millisecond, Timeout: 2 * time.Second, AllowPrivate: true}
	url, client := e.gateway(func(c *httpapi.Config) { c.Webhooks = wc })
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgWithWebhook("Alice's report", rc.srv.URL+"/hook"))
	if err != nil {
		t.Fatal(err)
	}
	rc.waitDeliveries(t, 1)
	raw, _ := hex.DecodeString(strings.TrimPrefix(r.ID, "resp_"))
	body := `{"conversationId":"elsewhere","turnId":"` + uuid.UUID(raw).String() + `","instruction":"Bob's turn","ragScope":"none"}`
	if st, _, b := call(t, http.MethodPost, url+"/v1/aptix/execute", body, nil); st != http.StatusOK || !strings.Contains(b, "Bob's turn") {
		t.Fatalf("execute: %d %s", st, b)
	}
	time.Sleep(time.Second) // a webhook would have gone by now (the first took milliseconds)
	if d := rc.deliveries(); len(d) != 1 {
		t.Fatalf("the response's receiver got %d webhooks, want its one: another conversation's turn sent %s", len(d), d[len(d)-1].body)
	}
}
