package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	envstage "github.com/aptix-dev/aptix/services/envelope/stage"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

var updateBodies = flag.Bool("update-bodies", false, "rewrite testdata/upstream-bodies from this build")

// convRecord is a ConversationStore holding one record.
type convRecord struct{ rec *store.Conversation }

func (c convRecord) Get(context.Context, string) (*store.Conversation, error) { return c.rec, nil }

// recorder keeps the body of every POST the upstream receives.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	next   http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.next.ServeHTTP(w, req)
}

// TestUpstreamBodies pins the body the upstream receives for one turn of
// each request shape, from the envelope's Handle through the LLM caller's
// Call (testdata/upstream-bodies, written by the build before the body was
// built in one pass: go test -run TestUpstreamBodies -update-bodies). Each
// case says whether the bytes are the same or the JSON value is: a body the
// old envelope re-encoded from a map had its keys sorted, which no reader
// of the body depends on.
func TestUpstreamBodies(t *testing.T) {
	chunks := []contracts.RagChunk{
		{Id: "c1", Path: "billing/invoice.go", StartLine: 1, EndLine: 3, Language: "Go", Content: "package billing\n\n// Invoice <a & b>\ntype Invoice struct{}"},
		{Id: "c2", Path: "README.md", StartLine: 10, EndLine: 12, Language: "markdown", Content: "```sh\nmake\n```\n\u2028 line sep"},
	}
	const fnTool = `[{"type":"function","function":{"name":"lookup","description":"Look up","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},{"type":"web_search"}]`
	gatewayInput := `[{"type":"message","role":"assistant","content":"earlier"},{"type":"message","role":"user","content":[{"type":"input_text","text":"What is in <this> image?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]`
	base := func() contracts.AgentExecuteRequest {
		return contracts.AgentExecuteRequest{ConversationId: "conv", TurnId: "t1", Mode: "ASK", Instruction: "What is in <this> image?"}
	}
	type shape struct {
		name    string
		req     func() contracts.AgentExecuteRequest
		rec     *store.Conversation
		chunks  bool
		edit    func(p *profiles.Profile)
		history map[string][]json.RawMessage
		mcp     bool
		// bytes: the new build sends the same bytes; otherwise the same JSON value.
		bytes bool
	}
	shapes := []shape{
		{name: "plain", chunks: true, bytes: true, req: func() contracts.AgentExecuteRequest {
			r := base()
			r.ToolsJson, r.ToolChoiceName = fnTool, "lookup"
			r.ConversationContext = &contracts.ConversationContext{SystemPrompt: "Be brief.", DefaultModel: "sandbox-1"}
			return r
		}},
		{name: "plain-stream", chunks: true, req: func() contracts.AgentExecuteRequest {
			r := base()
			r.Stream = true
			return r
		}},
		{name: "passthrough", chunks: true, req: func() contracts.AgentExecuteRequest {
			r := base()
			r.ToolsJson, r.ToolChoiceName, r.MaxOutputTokens = fnTool, "auto", 300
			r.ConversationContext = &contracts.ConversationContext{SystemPrompt: "Be <brief>."}
			r.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(gatewayInput), InstructionItem: 1,
				Fields: json.RawMessage(`{"metadata":{"k":"<v>"},"temperature":0.2,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"truncation":"disabled"}`)}
			return r
		}},
		{name: "passthrough-background", chunks: true, edit: func(p *profiles.Profile) { p.Capabilities.Reattach = true }, req: func() contracts.AgentExecuteRequest {
			r := base()
			r.Stream = true
			r.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(gatewayInput), InstructionItem: 1, Fields: json.RawMessage(`{"temperature":1}`)}
			return r
		}},
		{name: "function-outputs", req: func() contracts.AgentExecuteRequest {
			r := base()
			r.ResponseContinuationId, r.ToolsJson = "resp_prev", fnTool
			r.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"type":"function_call_output","call_id":"call_1","output":"42"}]`), InstructionItem: -1}
			return r
		}},
		{name: "mcp", mcp: true, req: func() contracts.AgentExecuteRequest {
			r := base()
			r.ToolsJson = `[{"type":"mcp","server_label":"docs","require_approval":"always"},{"type":"function","name":"lookup"}]`
			r.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"role":"user","content":"What is in <this> image?"}]`), InstructionItem: 0, Fields: json.RawMessage(`{"max_tool_calls":4}`)}
			return r
		}},
		{name: "approvals", rec: &store.Conversation{ResponseId: "resp_prev", Backend: "sb",
			Approvals: []contracts.PendingApproval{{ID: "mcpr_1", CallID: "call_1", Server: "docs", Tool: "search"}, {ID: "mcpr_2", CallID: "call_2", Server: "docs", Tool: "delete"}},
			Pending:   []json.RawMessage{json.RawMessage(`{"type":"function_call_output","call_id":"call_0","output":"done"}`)}},
			req: func() contracts.AgentExecuteRequest {
				r := base()
				r.OpenAI = &contracts.OpenAIPassthrough{InstructionItem: 1, Input: json.RawMessage(`[` +
					`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true},` +
					`{"type":"message","role":"user","content":"go on"}]`)}
				return r
			}},
		{name: "continuation", chunks: true, bytes: true,
			rec: &store.Conversation{ResponseId: "resp_prev", Backend: "sb", Tools: json.RawMessage(`[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}},"strict":false}]`)},
			req: func() contracts.AgentExecuteRequest { return base() }},
		{name: "continuation-replayed", chunks: true,
			edit:    func(p *profiles.Profile) { p.Capabilities.SupportsPreviousResponseID = false },
			history: map[string][]json.RawMessage{"resp_prev": {json.RawMessage(`{"type":"message","role":"user","content":"first"}`), json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"one"}]}`)}},
			rec:     &store.Conversation{ResponseId: "resp_prev", Backend: "sb"},
			req:     func() contracts.AgentExecuteRequest { return base() }},
		{name: "chat-completions", chunks: true,
			edit: func(p *profiles.Profile) {
				p.API = profiles.APIChatCompletions
				p.Capabilities.SupportsPreviousResponseID = false
			},
			req: func() contracts.AgentExecuteRequest {
				r := base()
				r.ToolsJson = `[{"type":"function","name":"lookup"}]`
				r.OpenAI = &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"role":"user","content":"What is in <this> image?"}]`), InstructionItem: 0, Fields: json.RawMessage(`{"temperature":0.5}`)}
				return r
			}},
		{name: "prompt-tools", chunks: true, bytes: true,
			edit: func(p *profiles.Profile) { p.Capabilities.ToolMode = profiles.ToolModePrompt },
			req: func() contracts.AgentExecuteRequest {
				r := base()
				r.ToolsJson, r.ToolChoiceName = fnTool, "lookup"
				return r
			}},
	}
	dir := filepath.Join("testdata", "upstream-bodies")
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			rec := &recorder{next: sandbox.New(sandbox.Options{Logger: quiet})}
			ts := httptest.NewServer(rec)
			defer ts.Close()
			p := profiles.Profile{Name: "sb", BaseURL: ts.URL + "/v1", DefaultModel: "sandbox-1", Sandbox: true,
				AttemptTimeout: 5 * time.Second, TurnTimeout: 10 * time.Second, MaxConcurrent: 4,
				Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}}
			if sh.edit != nil {
				sh.edit(&p)
			}
			set := &profiles.Set{}
			set.Put(p)
			set.Default = "sb"
			env := &envstage.Envelope{Profiles: set}
			if sh.rec != nil {
				env.Conversations = convRecord{sh.rec}
			}
			turn := &contracts.Turn{ConversationId: "conv", TurnId: "t1", Request: sh.req()}
			if sh.chunks {
				turn.Retrieval = &contracts.Retrieval{Scope: contracts.RagScopeWorkspace, Chunks: append([]contracts.RagChunk(nil), chunks...)}
			}
			ctx := context.Background()
			if err := env.Handle(ctx, turn); err != nil {
				t.Fatalf("envelope: %v", err)
			}
			if (turn.Tools != nil) != (sh.mcp || sh.rec != nil && len(sh.rec.Approvals) > 0) {
				t.Fatalf("tool loop %+v", turn.Tools)
			}
			hs := caller.NewMemHistoryStore()
			for id, items := range sh.history {
				if err := hs.Put(ctx, id, items); err != nil {
					t.Fatal(err)
				}
			}
			c := caller.New(set, caller.Options{Logger: quiet, History: hs})
			res := c.Call(ctx, caller.Input{ConversationID: "conv", TurnID: "conv/t1", Backend: turn.Envelope.Backend, Model: turn.Envelope.Model,
				Body: turn.Envelope.Body, Stream: turn.Request.Stream, Emulation: turn.Envelope.ToolEmulation})
			// The sandbox holds no earlier response: a continuation is
			// answered previous_response_not_found, after its body is seen.
			if res.Error != nil && res.Error.Code != "previous_response_not_found" {
				t.Fatalf("call: %+v", res.Error)
			}
			if len(rec.bodies) != 1 {
				t.Fatalf("%d requests upstream, want 1", len(rec.bodies))
			}
			got := rec.bodies[0]
			if !turn.Request.Stream && p.Capabilities.SupportsPreviousResponseID && !p.Capabilities.Reattach && !p.ChatCompletions() &&
				!bytes.Equal(got, turn.Envelope.Body) {
				// Nothing for the call to change: the body goes as built.
				t.Fatalf("the LLM caller changed a body it had no reason to\n sent %s\nbuilt %s", got, turn.Envelope.Body)
			}
			file := filepath.Join(dir, sh.name+".json")
			if *updateBodies {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(got, want) {
				return
			}
			if sh.bytes {
				t.Fatalf("body changed\n got %s\nwant %s", got, want)
			}
			if g, w := normalized(t, got), normalized(t, want); g != w {
				t.Fatalf("body's JSON value changed\n got %s\nwant %s", g, w)
			}
			t.Logf("the same JSON value in other bytes")
		})
	}
}

// normalized is a JSON value re-encoded with its object keys sorted.
func normalized(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
