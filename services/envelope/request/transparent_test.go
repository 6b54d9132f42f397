package request

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// TestBuildTransparent: Framing none sends the client's items byte for
// byte and its instructions on this request only; Aptix adds only a
// context block the client asked for, and tool emulation's instructions
// after the client's.
func TestBuildTransparent(t *testing.T) {
	items := `[{"type":"message","role":"developer","content":"Be brief."},{"type":"message","role":"user","content":[{"type":"input_text","text":"What is <this>?"},{"type":"input_image","image_url":"https://x/cat.png"}]}]`
	base := func() contracts.AgentExecuteRequest {
		return contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t", Instruction: "What is <this>?", Framing: contracts.FramingNone,
			OpenAI: &contracts.OpenAIPassthrough{Input: json.RawMessage(items), InstructionItem: 1, Instructions: "Answer in French.",
				Fields: json.RawMessage(`{"temperature":0.2}`)}}
	}
	fn := []tooldef.Tool{{Type: "function", Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}
	cases := []struct {
		name  string
		in    func() Input
		check func(t *testing.T, body map[string]json.RawMessage)
	}{
		{"items and instructions as sent", func() Input { return Input{Request: base()} }, func(t *testing.T, b map[string]json.RawMessage) {
			if string(b["input"]) != items {
				t.Errorf("input %s, want the client's bytes", b["input"])
			}
			if string(b["instructions"]) != `"Answer in French."` || string(b["temperature"]) != "0.2" {
				t.Errorf("instructions %s temperature %s", b["instructions"], b["temperature"])
			}
		}},
		{"a system prompt of the context is not sent", func() Input {
			return Input{Request: base(), Conversation: contracts.ConversationContext{SystemPrompt: "boot", Mode: "DDR"}}
		}, func(t *testing.T, b map[string]json.RawMessage) {
			if strings.Contains(string(b["input"]), "boot") || strings.Contains(string(b["input"]), "[MODE") {
				t.Errorf("input %s", b["input"])
			}
		}},
		{"context block as one more part of the question", func() Input { return Input{Request: base(), ContextBlock: "[CONTEXT]\nx"} },
			func(t *testing.T, b map[string]json.RawMessage) {
				var in []map[string]json.RawMessage
				_ = json.Unmarshal(b["input"], &in)
				if len(in) != 2 || string(in[0]["content"]) != `"Be brief."` ||
					!strings.HasSuffix(string(in[1]["content"]), `{"type":"input_image","image_url":"https://x/cat.png"},{"type":"input_text","text":"[CONTEXT]\nx"}]`) {
					t.Errorf("input %s", b["input"])
				}
			}},
		{"no prior tools on a continuation", func() Input {
			r := base()
			r.ResponseContinuationId = "up_1"
			return Input{Request: r, PriorTools: fn}
		}, func(t *testing.T, b map[string]json.RawMessage) {
			if b["tools"] != nil || string(b["previous_response_id"]) != `"up_1"` {
				t.Errorf("tools %s previous %s", b["tools"], b["previous_response_id"])
			}
		}},
		{"emulation's instructions after the client's", func() Input {
			r := base()
			r.ToolsJson = `[{"type":"function","name":"lookup","parameters":{"type":"object"}}]`
			return Input{Request: r, Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModePrompt}}
		}, func(t *testing.T, b map[string]json.RawMessage) {
			var s string
			_ = json.Unmarshal(b["instructions"], &s)
			if !strings.HasPrefix(s, "Answer in French.\n\n") || !strings.Contains(s, "lookup") {
				t.Errorf("instructions %q", s)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(tc.in())
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(res.Body, &body); err != nil {
				t.Fatal(err)
			}
			tc.check(t, body)
		})
	}
	r := base()
	r.OpenAI.Input = nil
	if _, err := Build(Input{Request: r}); err == nil || !strings.Contains(err.Error(), "openai.input") {
		t.Errorf("no input: %v", err)
	}
}
