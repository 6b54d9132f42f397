package stack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// manyTools is n function tools in the Responses shape, about size bytes in all.
func manyTools(n, size int) string {
	per := size / n
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		desc := strings.Repeat("d", max(per-110, 1))
		fmt.Fprintf(&b, `{"type":"function","name":"tool_%04d","description":"%s","parameters":{"type":"object","properties":{}}}`, i, desc)
	}
	b.WriteString("]")
	return b.String()
}

// TestOversizeTurnsComplete: turns whose events outgrow NATS's
// 1 MiB max payload, within the documented request limits, complete: their
// large events go through the claim check instead of being dropped.
func TestOversizeTurnsComplete(t *testing.T) {
	big := strings.Repeat("x", 900<<10)
	e := newEnv(t, sandbox.Options{Script: []string{big}}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 15*time.Second, 30*time.Second
		c.Profiles.Put(p)
	})
	tools5000 := manyTools(5000, 255<<10)
	tools500k := manyTools(500, 500<<10)
	instruction256k := strings.Repeat("i", contracts.MaxInstructionBytes)
	for _, tt := range []struct {
		name string
		req  contracts.AgentExecuteRequest
		kind string
		size int // the upstream text must be at least this long
	}{
		{"900 KB upstream response", contracts.AgentExecuteRequest{ConversationId: "big-resp", TurnId: "r1", Instruction: "long answer"}, contracts.KindOK, 900 << 10},
		{"5000 tools in 255 KB", contracts.AgentExecuteRequest{ConversationId: "big-tools", TurnId: "t1", Instruction: "use one", ToolsJson: tools5000}, contracts.KindOK, 0},
		{"instruction of exactly 256 KiB", contracts.AgentExecuteRequest{ConversationId: "big-instr", TurnId: "i1", Instruction: instruction256k, ToolsJson: tools500k}, contracts.KindOK, 0},
		{"conversation with 500 KB of recorded tools, turn 1", contracts.AgentExecuteRequest{ConversationId: "big-conv", TurnId: "c1", Instruction: "first", ToolsJson: tools500k}, contracts.KindOK, 0},
		{"a plain 100 KiB turn continuing it", contracts.AgentExecuteRequest{ConversationId: "big-conv", TurnId: "c2", Instruction: strings.Repeat("y", 100<<10)}, contracts.KindOK, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.RagScope = contracts.RagScopeNone
			if err := tt.req.Validate(); err != nil {
				t.Fatalf("the request is outside the documented limits: %v", err)
			}
			turn := e.turn(tt.req)
			r := turn.Response
			if r.Kind != tt.kind || len(r.Text) < tt.size {
				t.Fatalf("kind %s (%s %s), text %d bytes", r.Kind, r.ErrorCode, r.ErrorMessage, len(r.Text))
			}
		})
	}
	// The recorded tools were used by the continuation.
	if n := e.count(contracts.DeadSubject("envelope")) + e.count(contracts.DeadSubject("mapper")) + e.count(contracts.DeadSubject("llmcaller")); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	last, err := client.Await(ctx, e.js, "big-conv", "c2")
	if err != nil || last.Envelope == nil || !strings.Contains(string(last.Envelope.Tools), "tool_0499") {
		t.Fatalf("continuation did not carry the recorded tools: %v", err)
	}
	e.settled()
}
