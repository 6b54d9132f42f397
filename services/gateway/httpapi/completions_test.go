package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestCompletedTurnFields: completedTurn decodes every section of a turn
// but the two it leaves out on purpose; a section added to contracts.Turn
// must be added here too (or left out with a reason).
func TestCompletedTurnFields(t *testing.T) {
	left := map[string]bool{"Request": true, "Retrieval": true}
	turn, slim := reflect.TypeFor[contracts.Turn](), reflect.TypeFor[completedTurn]()
	for i := range turn.NumField() {
		f := turn.Field(i)
		s, ok := slim.FieldByName(f.Name)
		if !ok {
			t.Errorf("contracts.Turn.%s is not decoded for a response", f.Name)
			continue
		}
		if s.Tag.Get("json") != f.Tag.Get("json") && !left[f.Name] {
			t.Errorf("%s: tag %q, contracts.Turn's %q", f.Name, s.Tag.Get("json"), f.Tag.Get("json"))
		}
		if s.Type != f.Type && !left[f.Name] {
			t.Errorf("%s: type %s, contracts.Turn's %s", f.Name, s.Type, f.Type)
		}
	}
}

// TestDecodeCompletedBuildsTheSameResponse: the response built from the
// partly decoded completion is the one built from the whole turn, for a
// turn with every section set (a file_search response reads the query).
func TestDecodeCompletedBuildsTheSameResponse(t *testing.T) {
	full := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c-t1", TurnId: "t1", Instruction: "Explain the pool.",
		ToolsJson: `[{"type":"function","name":"f","parameters":{"type":"object"}}]`, OpenAI: &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"type":"message","role":"user","content":"Explain the pool."}]`)}})
	full.Retrieval = &contracts.Retrieval{Scope: "workspace", Query: "connection pool", Chunks: []contracts.RagChunk{{Id: "c1", Path: "a.go", StartLine: 1, EndLine: 9, Score: 1.5}}}
	full.Envelope = &contracts.Envelope{Backend: "sandbox", Model: "m", Sources: []contracts.SourceRef{{Id: "c1", Path: "a.go", StartLine: 1, EndLine: 9}}}
	full.LLM = &contracts.LLMResult{Backend: "sandbox", Model: "m", Status: 200, TruncatedItems: 1,
		Body: `{"id":"resp_up","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It reuses [c1].","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}`}
	full.Response = &contracts.AgentExecuteResponse{Kind: "ok", ConversationId: "c-t1", TurnId: "t1", Text: "It reuses [c1].", ResponseContinuationId: "resp_up"}
	full.Warnings = []string{"w"}
	data, err := json.Marshal(&full)
	if err != nil {
		t.Fatal(err)
	}
	slim, err := decodeCompleted(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, meta := range []responses.Meta{
		{ID: "resp_1", ConversationID: "c-t1", TurnID: "t1", Model: "m"},
		{ID: "resp_1", ConversationID: "c-t1", TurnID: "t1", Model: "m", FileSearch: true, FileSearchResults: true},
	} {
		want, _ := json.Marshal(responses.FromTurn(meta, &full, 7))
		got, _ := json.Marshal(responses.FromTurn(meta, &slim, 7))
		if string(got) != string(want) {
			t.Fatalf("file search %v:\n got %s\nwant %s", meta.FileSearch, got, want)
		}
	}
	if _, err := decodeCompleted([]byte(`{"turnId":`)); err == nil {
		t.Fatal("a truncated event decoded")
	}
}

// BenchmarkDecodeCompleted: a completed event of the benchmark's shape (8
// retrieved chunks, a function tool, the upstream body and the mapped
// text), decoded whole and as completedTurn.
func BenchmarkDecodeCompleted(b *testing.B) {
	req := contracts.AgentExecuteRequest{ConversationId: "c-t1", TurnId: "t1", Mode: "ANALYZE", WorkspaceId: "go", RagScope: "workspace",
		Instruction:         "Explain how the HTTP client reuses connections and where timeouts are enforced.",
		ConversationContext: &contracts.ConversationContext{SystemPrompt: "You are a senior Go reviewer. Answer precisely and cite chunk ids."},
		ToolsJson:           `[{"name":"ddr_document","parameters":{"additionalProperties":false,"properties":{"body":{"type":"string"},"title":{"type":"string"}},"required":["title","body"],"type":"object"},"strict":true,"type":"function","description":"Write a design decision record"}]`,
		OpenAI:              &contracts.OpenAIPassthrough{Input: json.RawMessage(`[{"content":[{"text":"Explain how the HTTP client reuses connections and where timeouts are enforced.","type":"input_text"}],"role":"user","type":"message"}]`)}}
	full := contracts.NewTurn(req)
	full.Retrieval = &contracts.Retrieval{Scope: "workspace", Query: req.Instruction}
	full.Envelope = &contracts.Envelope{Backend: "sandbox", Model: "sandbox-1", Tools: json.RawMessage(req.ToolsJson)}
	for i := range 8 {
		c := contracts.RagChunk{Id: "chunk-" + string(rune('a'+i)), Path: "net/http/transport.go", StartLine: 100 * i, EndLine: 100*i + 40, Language: "Go", Score: 1.5}
		full.Retrieval.Chunks = append(full.Retrieval.Chunks, c)
		full.Envelope.Sources = append(full.Envelope.Sources, contracts.SourceRef{Id: c.Id, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine})
	}
	text := "Connections are reused by the Transport's idle pool [chunk-a][chunk-b]; timeouts are enforced by the client's Timeout and the dialer [chunk-c]. "
	full.LLM = &contracts.LLMResult{Backend: "sandbox", Model: "sandbox-1", Status: 200,
		Body: `{"id":"resp_up","object":"response","status":"completed","model":"sandbox-1","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + text + `","annotations":[]}]}],"usage":{"input_tokens":900,"output_tokens":40,"total_tokens":940}}`}
	full.Response = &contracts.AgentExecuteResponse{Kind: "ok", ConversationId: "c-t1", TurnId: "t1", Text: text + text, ResponseContinuationId: "resp_up", Sources: full.Envelope.Sources}
	data, _ := json.Marshal(&full)
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t contracts.Turn
			if err := jsonv2.Unmarshal(data, &t, turnCodec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("completedTurn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCompleted(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
