package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// restartable is a sandbox that can be restarted: the new one knows none
// of the responses the old one made, as a backend that lost them.
type restartable struct {
	t       testing.TB
	current atomic.Pointer[sandbox.Server]
}

// restartableBackend points the sandbox profile at a restartable sandbox.
func restartableBackend(t testing.TB) (*restartable, func(*Config)) {
	r := &restartable{t: t}
	r.restart()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.current.Load().ServeHTTP(w, req) }))
	t.Cleanup(hs.Close)
	return r, func(c *Config) {
		p, err := c.Profiles.Get("sandbox")
		if err != nil {
			t.Fatal(err)
		}
		p.BaseURL = hs.URL + "/v1"
		c.Profiles.Put(p)
	}
}

func (r *restartable) restart() *sandbox.Server {
	s := sandbox.New(sandbox.Options{Logger: quiet})
	r.current.Store(s)
	return s
}

// keptRecords is how many records the LLM caller's history stores hold.
func (e *env) keptRecords() uint64 {
	e.t.Helper()
	var n uint64
	for _, name := range []string{"KV_" + caller.HistoryKVBucket, "OBJ_" + caller.HistoryBucket} {
		s, err := e.js.Stream(context.Background(), name)
		if err != nil {
			e.t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		n += info.State.Msgs
	}
	return n
}

// sentItems names the input items of a request body: "role:text" for a
// message, the type for any other item.
func sentItems(t testing.TB, raw []byte) (prev string, items []string) {
	t.Helper()
	var b struct {
		Prev  string `json:"previous_response_id"`
		Input []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("request body %s: %v", raw, err)
	}
	for _, it := range b.Input {
		if it.Role == "" {
			items = append(items, it.Type)
			continue
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(it.Content, &parts)
		text := ""
		if len(parts) > 0 {
			text = parts[0].Text
		}
		items = append(items, it.Role+":"+text)
	}
	return b.Prev, items
}

// TestRecoverFromEvents: the backend (threading by previous_response_id)
// restarts and has lost the response the conversation continues from. The
// next turn is recovered from the conversation's events in the stream:
// sent again, once, with every earlier item as input, and answered with a
// warning; the turn after it threads normally. Nothing was written to the
// history stores on the way: the turns' events are the record.
func TestRecoverFromEvents(t *testing.T) {
	sb, backend := restartableBackend(t)
	e := newEnv(t, sandbox.Options{}, backend)
	conv := &contracts.ConversationContext{Id: "rec", SystemPrompt: "You are the boot prompt."}
	turn := func(id, instruction string) contracts.Turn {
		return e.turn(contracts.AgentExecuteRequest{ConversationContext: conv, ConversationId: "conv-rec", TurnId: id,
			Instruction: instruction, RagScope: contracts.RagScopeNone})
	}
	for i, q := range []string{"First question", "Second question"} {
		if r := turn([]string{"t1", "t2"}[i], q).Response; r.Kind != contracts.KindOK {
			t.Fatalf("turn %d: %+v", i+1, r)
		}
	}
	if n := e.keptRecords(); n != 0 {
		t.Fatalf("%d records written to the history stores for two turns on a backend that threads by previous_response_id", n)
	}

	fresh := sb.restart()
	t3 := turn("t3", "Third question")
	if r := t3.Response; r.Kind != contracts.KindOK || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "conv-rec") {
		t.Fatalf("turn 3 not recovered: %+v", r)
	}
	prev, items := sentItems(t, fresh.LastRequest())
	var got []string
	for _, it := range items {
		role, text, _ := strings.Cut(it, ":")
		if role == "user" { // the AGN-003 user message: its instruction
			_, text, _ = strings.Cut(text, "[INSTRUCTION]\n")
			text, _, _ = strings.Cut(text, "\n")
		} else if role == "assistant" {
			text = "…"
		}
		got = append(got, role+":"+text)
	}
	want := "system:You are the boot prompt.,user:First question,assistant:…,user:Second question,assistant:…,user:Third question"
	if prev != "" || strings.Join(got, ",") != want || fresh.Requests() != 2 {
		t.Fatalf("recovery sent previous_response_id %q, items\n%s\nwant\n%s\nafter %d requests", prev, strings.Join(got, ","), want, fresh.Requests())
	}
	t4 := turn("t4", "Fourth question")
	if r := t4.Response; r.Kind != contracts.KindOK || len(r.Warnings) != 0 || !strings.Contains(r.Text, "Continuing from "+t3.Response.ResponseContinuationId) {
		t.Fatalf("turn 4: %+v", r)
	}
	if n := e.keptRecords(); n != 0 {
		t.Fatalf("%d records written to the history stores", n)
	}
	e.settled()
}

// TestRecoverToolLoopFromEvents: a response made by a server-side tool
// loop (two model calls: the model calls an MCP tool, then answers from
// its output) is lost; the next response is recovered with both calls'
// items, each round's body read from its enveloped event and its output
// from the toolround or responded event after it.
func TestRecoverToolLoopFromEvents(t *testing.T) {
	sb, backend := restartableBackend(t)
	e, _ := toolEnv(t, backend)
	_, client := e.gateway()
	r1, err := client.Responses.New(ctxT(t), loopParams(`Add them [call:add {"a":2,"b":3}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(itemTypes(r1), ","); got != "mcp_list_tools,mcp_call,message" {
		t.Fatalf("output items %s", got)
	}
	fresh := sb.restart()
	r2, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And now?")}})
	if err != nil {
		t.Fatalf("not recovered: %v", err)
	}
	prev, items := sentItems(t, fresh.LastRequest())
	var kinds []string
	for _, it := range items {
		kind, _, _ := strings.Cut(it, ":")
		kinds = append(kinds, kind)
	}
	// round 1: the request, the model's call; round 2: the tool's output,
	// the answer; then this turn.
	if want := "user,function_call,function_call_output,assistant,user"; prev != "" || strings.Join(kinds, ",") != want || fresh.Requests() != 2 {
		t.Fatalf("recovery sent previous_response_id %q, items %s (want %s) after %d requests", prev, strings.Join(kinds, ","), want, fresh.Requests())
	}
	if !strings.Contains(items[0], "Add them") || !strings.Contains(r2.OutputText(), "And now?") {
		t.Fatalf("items %q, answer %q", items, r2.OutputText())
	}
	if n := e.keptRecords(); n != 0 {
		t.Fatalf("%d records written to the history stores", n)
	}
}

// TestRecoverBranchFromEvents: a continuation of a response that is not its
// conversation's head any more branches into a new conversation, continuing
// from that response upstream. When the backend has lost it, the branch is
// recovered from the events of the conversation the response was made in
// (the branch's own conversation holds none of its calls yet), and so is a
// later turn of the branch, whose chain crosses into that conversation.
func TestRecoverBranchFromEvents(t *testing.T) {
	sb, backend := restartableBackend(t)
	e := newEnv(t, sandbox.Options{}, backend)
	_, client := e.gateway()
	say := func(prev, text string) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctxT(t), p)
		if err != nil {
			var apiErr *openai.Error
			if errors.As(err, &apiErr) {
				t.Fatalf("%q: %s", text, apiErr.Message)
			}
			t.Fatalf("%q: %v", text, err)
		}
		return r
	}
	r1 := say("", "First question")
	say(r1.ID, "Second question") // the head moves on
	fresh := sb.restart()
	r3 := say(r1.ID, "Branch question") // a branch from r1, which the backend lost
	prev, items := sentItems(t, fresh.LastRequest())
	if prev != "" || len(items) != 3 || !strings.Contains(items[0], "First question") || !strings.Contains(items[2], "Branch question") {
		t.Fatalf("branch recovery sent previous_response_id %q, items %q", prev, items)
	}
	fresh = sb.restart()
	say(r3.ID, "Branch follow-up") // the chain: this branch, then r1's conversation
	prev, items = sentItems(t, fresh.LastRequest())
	if prev != "" || len(items) != 5 || !strings.Contains(items[0], "First question") || !strings.Contains(items[2], "Branch question") {
		t.Fatalf("follow-up recovery sent previous_response_id %q, items %q", prev, items)
	}
}
