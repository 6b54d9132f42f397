package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestCompaction: POST /v1/responses/compact (AGN-003's context-size risk):
// the summary turn ends with the summary instruction; the compaction item
// Aptix returns turns back into a message carrying the summary when a later
// request sends it as input; a backend's own compaction item passes as is.
func TestCompaction(t *testing.T) {
	if _, e := ParseCompact([]byte(`{"model":"m","input":"x","stream":true}`)); e == nil || deref(e.Code) != CodeUnknownParameter {
		t.Fatalf("unknown compact parameter: %v", e)
	}
	if _, e := ParseCompact([]byte(`{"model":"m"}`)); e == nil || deref(e.Param) != "input" {
		t.Fatalf("neither input nor previous_response_id: %v", e)
	}
	if _, e := ParseCompact([]byte(`{"input":"x"}`)); e == nil || deref(e.Param) != "model" {
		t.Fatalf("no model: %v", e)
	}
	r, e := ParseCompact([]byte(`{"model":"m","input":[{"role":"user","content":"The deploy key is K-77"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Noted"}]}]}`))
	if e != nil {
		t.Fatal(e)
	}
	if idx, text := Instruction(r.Input); idx != 2 || text != CompactInstruction || len(r.CompactedInput) != 2 {
		t.Fatalf("summary turn: item %d %q, %d compacted items", idx, text, len(r.CompactedInput))
	}
	summary := FromTurn(Meta{ID: "resp_9"}, &contracts.Turn{LLM: &contracts.LLMResult{Status: 200,
		Body: `{"status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"Key K-77."}]}],"usage":{"input_tokens":5,"output_tokens":2}}`}}, 1)
	c := Compaction("resp_9", 1, r.CompactedInput, summary)
	if c.Object != "response.compaction" || len(c.Output) != 2 || c.Usage.TotalTokens != 7 {
		t.Fatalf("compaction %+v", c)
	}
	var msg struct {
		ID, Status string
		Content    []struct{ Type, Text string }
	}
	if json.Unmarshal(c.Output[0], &msg) != nil || msg.ID == "" || msg.Status != "completed" || len(msg.Content) != 1 || msg.Content[0].Text != "The deploy key is K-77" {
		t.Fatalf("user message as an output item: %s", c.Output[0])
	}
	var item struct {
		Type             string `json:"type"`
		EncryptedContent string `json:"encrypted_content"`
	}
	_ = json.Unmarshal(c.Output[1], &item)
	if item.Type != "compaction" || !strings.HasPrefix(item.EncryptedContent, compactionPrefix) {
		t.Fatalf("item %s", c.Output[1])
	}
	next, e := Parse(mustJSON(map[string]any{"input": append(c.Output, mustJSON(map[string]string{"role": "user", "content": "What is the key?"}))}))
	if e != nil {
		t.Fatal(e)
	}
	if len(next.Input) != 3 || !strings.Contains(string(next.Input[1]), `[COMPACTED CONVERSATION]\nKey K-77.`) {
		t.Fatalf("next input %s", next.Input)
	}
	foreign := `{"input":[{"type":"compaction","id":"cmp_x","encrypted_content":"gAAAA"},{"role":"user","content":"go on"}]}`
	if r, e := Parse([]byte(foreign)); e != nil || !strings.Contains(string(r.Input[0]), "gAAAA") {
		t.Fatalf("a backend's compaction item: %v %s", e, r.Input)
	}
}
