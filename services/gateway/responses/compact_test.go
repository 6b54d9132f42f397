package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/sealbox"
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
	keyA, keyB := sealbox.Generate(), sealbox.Generate()
	ringA, _ := sealbox.Parse(keyA)
	c := Compaction("resp_9", 1, r.CompactedInput, summary, ringA, "alice")
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
	if item.Type != "compaction" || !strings.HasPrefix(item.EncryptedContent, compactionPrefix) || strings.Contains(item.EncryptedContent, "K-77") {
		t.Fatalf("item %s", c.Output[1])
	}
	next, e := Parse(mustJSON(map[string]any{"input": append(c.Output, mustJSON(map[string]string{"role": "user", "content": "What is the key?"}))}))
	if e != nil {
		t.Fatal(e)
	}
	rotated, _ := sealbox.Parse(keyB + "," + keyA)
	onlyB, _ := sealbox.Parse(keyB)
	unbound := ringA.Seal(unboundCompactionPrefix, []byte("Key K-77."))
	for _, tc := range []struct {
		name      string
		keys      *sealbox.Keyring
		principal string
		item      string
		code      string
	}{
		{"round trip", ringA, "alice", item.EncryptedContent, ""},
		{"rotation: made under A, keys B,A", rotated, "alice", item.EncryptedContent, ""},
		{"key A retired", onlyB, "alice", item.EncryptedContent, CodeInvalidEncryptedContent},
		{"tampered", ringA, "alice", item.EncryptedContent[:len(item.EncryptedContent)-4] + "AAAA", CodeInvalidEncryptedContent},
		{"unsealed legacy item", ringA, "alice", "aptix1:S2V5IEstNzcu", CodeInvalidEncryptedContent},
		{"another principal's item", ringA, "bob", item.EncryptedContent, CodeInvalidEncryptedContent},
		{"made for alice, sent without authentication", ringA, "", item.EncryptedContent, CodeInvalidEncryptedContent},
		{"sealed before items were bound, authentication on", ringA, "alice", unbound, CodeInvalidEncryptedContent},
		{"sealed before items were bound, authentication off", ringA, "", unbound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]json.RawMessage{}, next.Input...)
			in[1] = mustJSON(map[string]string{"type": "compaction", "encrypted_content": tc.item})
			got, e := OpenCompactions(in, tc.keys, tc.principal)
			if tc.code != "" {
				if e == nil || deref(e.Code) != tc.code || deref(e.Param) != "input[1]" || e.Status != 400 {
					t.Fatalf("want a 400 %s on input[1], got %+v", tc.code, e)
				}
				return
			}
			if e != nil || len(got) != 3 || !strings.Contains(string(got[1]), `[COMPACTED CONVERSATION]\nKey K-77.`) {
				t.Fatalf("opened %v %s", e, got)
			}
		})
	}
	foreign := `{"input":[{"type":"compaction","id":"cmp_x","encrypted_content":"gAAAA"},{"role":"user","content":"go on"}]}`
	r, e = Parse([]byte(foreign))
	if e != nil {
		t.Fatal(e)
	}
	if in, e := OpenCompactions(r.Input, ringA, "alice"); e != nil || !strings.Contains(string(in[0]), "gAAAA") {
		t.Fatalf("a backend's compaction item: %v %s", e, in)
	}
}
