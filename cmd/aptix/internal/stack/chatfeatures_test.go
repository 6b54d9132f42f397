package stack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// chatLoopProfile is the Chat Completions profile over the sandbox's chat
// endpoint with room for a tool loop's several rounds.
var chatLoopProfile = chatProfile("", func(p *profiles.Profile) { p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second }, "sandbox-1")

// chatMessages are the roles and tool-call ids of the messages the last
// Chat Completions request sent.
func chatMessages(t *testing.T, body []byte) (roles []string, toolCallIDs []string) {
	t.Helper()
	var up struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &up); err != nil {
		t.Fatalf("upstream body %s: %v", body, err)
	}
	for _, m := range up.Messages {
		roles = append(roles, m.Role)
		if m.ToolCallID != "" {
			toolCallIDs = append(toolCallIDs, m.ToolCallID)
		}
	}
	return roles, toolCallIDs
}

// TestChatToolLoopApproval: require_approval "always" on a Chat Completions
// profile: the call ends the response with an mcp_approval_request and does
// not run; an approval (previous_response_id and an mcp_approval_response)
// runs it and the next round replays the call and its output as an
// assistant tool_calls message and a tool message; a denial does not run
// the call and the model reads that it was denied, again as a tool message.
func TestChatToolLoopApproval(t *testing.T) {
	e, srv := toolEnv(t, chatLoopProfile)
	_, client := e.gateway()
	ctx := ctxT(t)
	tools := []responses.ToolUnionParam{approvalTool("always", nil)}

	r1, err := client.Responses.New(ctx, loopParams(`Add them [call:add {"a":2,"b":3}]`, tools...))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r1), ","); got != "mcp_list_tools,mcp_approval_request" || r1.Status != responses.ResponseStatusCompleted {
		t.Fatalf("status %s output %s", r1.Status, got)
	}
	req := r1.Output[1].AsMcpApprovalRequest()
	if req.ID == "" || req.ServerLabel != "calc" || req.Name != "add" || req.Arguments != `{"a":2,"b":3}` || srv.Calls("add") != 0 {
		t.Fatalf("approval request %+v; add ran %d times before approval", req, srv.Calls("add"))
	}
	if !strings.Contains(string(e.sb.LastRequest()), `"messages"`) {
		t.Fatalf("the first round was not a Chat Completions request: %s", e.sb.LastRequest())
	}

	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID),
		Tools: tools, Input: approve(req.ID, true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r2), ","); got != "mcp_list_tools,mcp_call,message" {
		t.Fatalf("after approval: output %s", got)
	}
	call := r2.Output[1].AsMcpCall()
	if call.ApprovalRequestID != req.ID || call.Output != "5" || srv.Calls("add") != 1 || !strings.Contains(r2.OutputText(), `returned "5"`) {
		t.Fatalf("mcp_call %+v, add ran %d, answer %q", call, srv.Calls("add"), r2.OutputText())
	}
	roles, ids := chatMessages(t, e.sb.LastRequest())
	if n := len(roles); n < 3 || roles[0] != "user" || roles[n-2] != "assistant" || roles[n-1] != "tool" || len(ids) != 1 {
		t.Fatalf("round after approval: roles %v, tool_call_ids %v", roles, ids)
	}

	// Denied: the call does not run, the model reads that it was denied.
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r2.ID),
		Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`Again [call:add {"a":4,"b":4}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r3), ","); got != "mcp_list_tools,mcp_approval_request" || srv.Calls("add") != 1 {
		t.Fatalf("second call: output %s, add ran %d", got, srv.Calls("add"))
	}
	r4, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r3.ID),
		Tools: tools, Input: approve(r3.Output[1].AsMcpApprovalRequest().ID, false)})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Calls("add") != 1 || !strings.Contains(r4.OutputText(), "denied") || strings.Contains(strings.Join(itemTypes(r4), ","), "mcp_call") {
		t.Fatalf("denied: add ran %d, output %v, answer %q", srv.Calls("add"), itemTypes(r4), r4.OutputText())
	}
	roles, ids = chatMessages(t, e.sb.LastRequest())
	if n := len(roles); roles[n-1] != "tool" || len(ids) != 2 {
		t.Fatalf("round after the denial: roles %v, tool_call_ids %v", roles, ids)
	}

	// An answer to a request nothing waits for is the client's error.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r4.ID),
		Tools: tools, Input: approve(req.ID, true)})
	if ae := apiError(t, err, 400, "invalid_request"); !strings.Contains(ae.Message, req.ID) {
		t.Fatalf("message %q", ae.Message)
	}
	e.settled()
}

// TestChatInputTokens: POST /v1/responses/input_tokens on a Chat
// Completions profile, which has no input-token endpoint to forward to, is
// counted by the gateway's own tokenizer: a positive count, larger with
// previous_response_id of an earlier response on that profile (its history
// is replayed as a create would send it), and nothing reaches the backend,
// even when the profile claims inputTokens (a Chat Completions profile
// cannot hold it: profiles clear it and the gateway would not forward).
func TestChatInputTokens(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	// The chat profile reaches the sandbox through a proxy that records
	// every path the backend is asked for.
	proxied := func(c *Config) {
		p, err := c.Profiles.Get("chat")
		if err != nil {
			t.Fatal(err)
		}
		target, err := url.Parse(p.BaseURL)
		if err != nil {
			t.Fatal(err)
		}
		prefix := target.Path
		target.Path = ""
		rp := httputil.NewSingleHostReverseProxy(target)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		p.BaseURL = hs.URL + prefix
		p.Capabilities.InputTokens = true
		c.Profiles.Put(p)
	}
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1"), proxied)
	_, client := e.gateway()
	ctx := ctxT(t)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Instructions: openai.String("You are terse."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Remember the word: teal.")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 1 || got[0] != "/v1/chat/completions" {
		t.Fatalf("the create asked the backend for %v", got)
	}
	question := responses.InputTokenCountParamsInputUnion{OfString: openai.String("What was the word? Answer with the word alone.")}
	before := e.sb.Requests()
	alone, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question})
	if err != nil {
		t.Fatal(err)
	}
	chained, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question,
		PreviousResponseID: openai.String(first.ID)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("alone %d, with the history %d", alone.InputTokens, chained.InputTokens)
	if alone.Object != "response.input_tokens" || alone.InputTokens <= 0 || chained.InputTokens <= alone.InputTokens {
		t.Fatalf("alone %+v, with the history %+v", alone, chained)
	}
	// The history holds the instruction, the first input and its answer:
	// more than a handful of tokens.
	if chained.InputTokens < alone.InputTokens+10 {
		t.Fatalf("the history added %d tokens", chained.InputTokens-alone.InputTokens)
	}
	if e.sb.Requests() != before || len(seen()) != 1 {
		t.Fatalf("counting reached the backend: %v", seen())
	}
	_, err = client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Input: question,
		PreviousResponseID: openai.String("resp_0000000000000000000000000000dead")})
	apiError(t, err, 404, "previous_response_not_found")
}
