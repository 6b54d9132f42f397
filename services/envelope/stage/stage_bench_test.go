package stage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/stage"
)

// benchChunks are 8 chunks of 40 lines of Go source each, the size of the
// benchmark's fixture (bin/aptix bench).
func benchChunks() []contracts.RagChunk {
	chunks := make([]contracts.RagChunk, 8)
	for i := range chunks {
		var sb strings.Builder
		for l := 1; l <= 40; l++ {
			fmt.Fprintf(&sb, "\tif err := h.serve%d(w, r); err != nil && l < %d { // <%d> & \"quoted\"\n", i, l, l)
		}
		chunks[i] = contracts.RagChunk{Id: fmt.Sprintf("net-http-%d-1", i), Path: fmt.Sprintf("src/net/http/f%d.go", i),
			StartLine: 1, EndLine: 40, Language: "Go", Content: sb.String(), Score: float64(8 - i)}
	}
	return chunks
}

const benchTools = `[{"type":"function","function":{"name":"lookup","description":"Look a symbol up","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}},` +
	`{"type":"function","name":"open_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}},"strict":true},{"type":"web_search"}]`

// BenchmarkEnvelopeBody is the envelope's work on one turn with 8 chunks
// and tools: the context block, the /responses body and the event section,
// for a client of the bus and for one of the HTTP gateway (passthrough
// fields and input items).
func BenchmarkEnvelopeBody(b *testing.B) {
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", DefaultModel: "sandbox-1",
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}})
	set.Default = "sandbox"
	env := &stage.Envelope{Profiles: set}
	chunks := benchChunks()
	bus := contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t", Mode: "ASK", Instruction: "How does the server route a request?",
		ToolsJson: benchTools, ToolChoiceName: "auto",
		ConversationContext: &contracts.ConversationContext{SystemPrompt: "You are a Go expert.", DefaultModel: "sandbox-1"}}
	gw := bus
	gw.OpenAI = &contracts.OpenAIPassthrough{InstructionItem: 1,
		Input:  json.RawMessage(`[{"type":"message","role":"assistant","content":"earlier"},{"type":"message","role":"user","content":"How does the server route a request?"}]`),
		Fields: json.RawMessage(`{"temperature":0.2,"text":{"format":{"type":"text"}}}`)}
	for _, c := range []struct {
		name string
		req  contracts.AgentExecuteRequest
	}{{"bus", bus}, {"gateway", gw}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				t := &contracts.Turn{ConversationId: "c", TurnId: "t", Request: c.req,
					Retrieval: &contracts.Retrieval{Scope: contracts.RagScopeWorkspace, Chunks: append([]contracts.RagChunk(nil), chunks...)}}
				if err := env.Handle(ctx, t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
