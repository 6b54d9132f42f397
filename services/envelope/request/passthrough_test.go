package request

import (
	"encoding/json"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestApplyPassthrough: fields the turn does not model (docs/request.md#what-an-http-client-adds) travel
// to the upstream body untouched, while AGN-003 keeps what it governs.
func TestApplyPassthrough(t *testing.T) {
	first := contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t", Mode: "ANALYZE", Instruction: "What is in the image?"}
	conv := contracts.ConversationContext{SystemPrompt: "Be brief."}
	image := `{"type":"input_image","image_url":"data:image/png;base64,AAAA"}`
	cases := []struct {
		name string
		req  contracts.AgentExecuteRequest
		p    *contracts.OpenAIPassthrough
		want string // the body's input and extra fields, as JSON
	}{
		{"nil passthrough leaves the body as built", first, nil,
			`{"input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"Be brief."}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: ANALYZE]\n\n[INSTRUCTION]\nWhat is in the image?"}]}],"model":"m"}`},
		{"fields copied, governed ones never", first, &contracts.OpenAIPassthrough{
			Fields: json.RawMessage(`{"temperature":0.2,"text":{"format":{"type":"text"}},"model":"evil","store":false,"input":"x"}`), InstructionItem: 0},
			`{"input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"Be brief."}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: ANALYZE]\n\n[INSTRUCTION]\nWhat is in the image?"}]}],"model":"m","temperature":0.2,"text":{"format":{"type":"text"}}}`},
		{"image part kept after the AGN-003 parts, earlier items before", first, &contracts.OpenAIPassthrough{
			Input: json.RawMessage(`[{"type":"message","role":"assistant","content":"earlier"},{"type":"message","role":"user","content":[{"type":"input_text","text":"What is in the image?"},` + image + `]}]`), InstructionItem: 1},
			`{"input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"Be brief."}]},{"type":"message","role":"assistant","content":"earlier"},{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: ANALYZE]\n\n[INSTRUCTION]\nWhat is in the image?"},` + image + `]}],"model":"m"}`},
		{"function_call_output round: no user message", first, &contracts.OpenAIPassthrough{
			Input: json.RawMessage(`[{"type":"function_call_output","call_id":"call_1","output":"42"}]`), InstructionItem: -1},
			`{"input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"Be brief."}]},{"type":"function_call_output","call_id":"call_1","output":"42"}],"model":"m"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(Input{Request: tc.req, Conversation: conv, DefaultModel: "m"})
			if err != nil {
				t.Fatal(err)
			}
			body, err := ApplyPassthrough(res.Body, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("body\n got %s\nwant %s", gb, wb)
			}
		})
	}
	if _, err := ApplyPassthrough(json.RawMessage(`{"input":[{}]}`), &contracts.OpenAIPassthrough{Input: json.RawMessage(`[]`), InstructionItem: 3}); err == nil {
		t.Error("an instruction item outside the input must be an error")
	}
}
