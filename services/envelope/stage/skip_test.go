package stage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/stage"
)

// noRecord fails a test that reads a conversation's record: a turn that
// may skip the envelope has none to read.
type noRecord struct{ t *testing.T }

func (n noRecord) Get(context.Context, string) (*store.Conversation, error) {
	n.t.Error("the envelope read the record of a turn that starts its conversation")
	return nil, nil
}

// TestSkippedTurnReadsAsEnveloped: for every request pipeline.EntryOf lets
// skip the envelope, the turn the entrance stores (the retriever's and the
// envelope's sections filled by pipeline.FillSkipped) is byte for byte the
// turn the envelope writes after the retriever: the same enveloped
// section (backend, model, body, tools, price), the same chunks dropped,
// the same request left as it was, on every kind of backend profile.
func TestSkippedTurnReadsAsEnveloped(t *testing.T) {
	set := profiles.Builtin()
	set.Put(profiles.Profile{Name: "priced", DefaultModel: "m-default", Models: []string{"m-other"},
		Prices:       profiles.Prices{"*": {Input: 1.25, Output: 10}},
		Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModePrompt, RetainsTools: true, SupportsPreviousResponseID: true}})
	skip := pipeline.Skipping{Profiles: set}
	env := &stage.Envelope{Profiles: set, Conversations: noRecord{t}, Contexts: map[string]contracts.ConversationContext{"ddr": {SystemPrompt: "boot"}}}
	base := func(edit func(*contracts.AgentExecuteRequest)) contracts.AgentExecuteRequest {
		r := contracts.AgentExecuteRequest{ConversationId: "c-t1", TurnId: "t1", Instruction: "What is <this> & that?", RagScope: contracts.RagScopeNone,
			Framing: contracts.FramingNone, NewConversation: true, AgentContext: &contracts.AgentContext{Backend: "sandbox", Model: "sandbox-1"},
			OpenAI: &contracts.OpenAIPassthrough{InstructionItem: 1,
				Input: json.RawMessage(`[{"type":"message","role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"input_text","text":"What is \u003cthis\u003e \u0026 that?"},{"type":"input_image","image_url":"https://x/cat.png"}]}]`)}}
		edit(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  contracts.AgentExecuteRequest
	}{
		{"plain", base(func(*contracts.AgentExecuteRequest) {})},
		{"string input", base(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Input, r.OpenAI.InstructionItem = json.RawMessage(`[{"role":"user","content":"hello"}]`), 0
		})},
		{"fields, instructions, limit, stream", base(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Fields = json.RawMessage(`{"temperature":0.2,"text":{"format":{"type":"text"}},"store":false,"top_p":1,"metadata":{"k":"<v>"}}`)
			r.OpenAI.Instructions, r.MaxOutputTokens, r.Stream = "Answer in French.", 64, true
		})},
		{"a branch: continues an upstream response", base(func(r *contracts.AgentExecuteRequest) {
			r.ResponseContinuationId, r.ContinuationConversation = "resp_up", "c-other"
		})},
		{"function outputs only", base(func(r *contracts.AgentExecuteRequest) {
			r.OpenAI.Input, r.OpenAI.InstructionItem = json.RawMessage(`[{"type":"function_call_output","call_id":"a","output":"3"}]`), -1
		})},
		{"principal and budgets with a limit", base(func(r *contracts.AgentExecuteRequest) {
			r.Principal, r.KeyId, r.Budgets, r.MaxOutputTokens = "key:k", "k1", []contracts.Budget{{USD: 1, Period: "day"}}, 100
		})},
		{"profile default model", base(func(r *contracts.AgentExecuteRequest) { r.AgentContext = &contracts.AgentContext{Backend: "priced"} })},
		{"priced profile, emulated tools, a named model", base(func(r *contracts.AgentExecuteRequest) {
			r.AgentContext = &contracts.AgentContext{Backend: "priced", Model: "m-other"}
		})},
		{"an alias the gateway resolved", base(func(r *contracts.AgentExecuteRequest) {
			r.AgentContext = &contracts.AgentContext{Backend: "priced", Model: "priced/m-other"}
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pipeline.EntryOf(c.req, skip); got != contracts.StageEnveloped {
				t.Fatalf("EntryOf = %s, want %s: the case tests nothing", got, contracts.StageEnveloped)
			}
			skipped := contracts.NewTurn(c.req)
			for _, st := range []string{"retriever", "envelope"} {
				if err := pipeline.FillSkipped(st, &skipped, skip); err != nil {
					t.Fatal(err)
				}
			}
			ran := contracts.NewTurn(c.req)
			if err := pipeline.FillSkipped("retriever", &ran, skip); err != nil {
				t.Fatal(err)
			}
			if err := env.Handle(context.Background(), &ran); err != nil {
				t.Fatal(err)
			}
			if ran.Tools != nil {
				t.Fatalf("the envelope made a tool loop %+v (a route to the toolrunner) for a turn that may skip it", ran.Tools)
			}
			want, _ := json.Marshal(ran.Envelope)
			got, _ := json.Marshal(skipped.Envelope)
			if !bytes.Equal(got, want) {
				t.Errorf("enveloped section:\n envelope %s\n skipped  %s", want, got)
			}
			want, _ = json.Marshal(&ran)
			got, _ = json.Marshal(&skipped)
			if !bytes.Equal(got, want) || !reflect.DeepEqual(ran, skipped) {
				t.Errorf("turn:\n envelope %s\n skipped  %s", want, got)
			}
		})
	}
}
