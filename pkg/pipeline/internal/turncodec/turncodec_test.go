package turncodec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// sampleTurn is a completed turn of the size the benchmark produces: 8 chunks,
// the /responses body with their context block, an upstream body and the response.
func sampleTurn() contracts.Turn {
	t := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Mode: "ANALYZE",
		Instruction: "Explain how the HTTP client reuses connections.", ToolsJson: `[{"type":"function","name":"f","parameters":{"type":"object"}}]`})
	var chunks []contracts.RagChunk
	var block strings.Builder
	for i := range 8 {
		content := strings.Repeat(fmt.Sprintf("func f%d() { return \"x\\t<y>\" } // line\n", i), 30)
		chunks = append(chunks, contracts.RagChunk{Id: fmt.Sprintf("c%d", i), Path: "a/b.go", StartLine: 1, EndLine: 30, Language: "Go", Content: content, Score: 1.5})
		block.WriteString(content)
	}
	t.Retrieval = &contracts.Retrieval{Scope: "workspace", Chunks: chunks}
	text, _ := json.Marshal(block.String())
	t.Envelope = &contracts.Envelope{Backend: "sandbox", Model: "m", Body: json.RawMessage(`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":` + string(text) + `}]}]}`)}
	t.LLM = &contracts.LLMResult{Backend: "sandbox", Status: 200, Body: `{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":` + string(text[:2000]) + `"}]}]}`}
	t.Response = &contracts.AgentExecuteResponse{Kind: "ok", ConversationId: "c1", TurnId: "t1", Text: block.String()[:2000], Sources: []contracts.SourceRef{}, Warnings: []string{}, ToolCalls: []contracts.AgentToolCall{}}
	return t
}

// TestTurnCodecMatchesEncodingJSON: the v2 engine with v1 options must read
// and write exactly what encoding/json does, so any client's decoder agrees.
func TestTurnCodecMatchesEncodingJSON(t *testing.T) {
	turn := sampleTurn()
	want, err := json.Marshal(&turn)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(&turn)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("encodings differ:\nv2: %.300s\nv1: %.300s", got, want)
	}
	var back contracts.Turn
	if err := Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&back)
	if string(again) != string(want) {
		t.Fatal("decode then encode does not round-trip")
	}
	if err := Unmarshal([]byte(`{"turnId":`), &back); err == nil {
		t.Fatal("truncated JSON decoded without error")
	}
}

func BenchmarkTurnCodec(b *testing.B) {
	turn := sampleTurn()
	data, _ := json.Marshal(&turn)
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var t contracts.Turn
			if err := json.Unmarshal(data, &t); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(&t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v2-engine-v1-options", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var t contracts.Turn
			if err := Unmarshal(data, &t); err != nil {
				b.Fatal(err)
			}
			if _, err := Marshal(&t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
