package chatcompletions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// benchBody is a first turn the size the envelope writes (a boot prompt,
// the instruction and an ~10 KB context block, one tool).
func benchBody(b *testing.B) []byte {
	ctx := "[CONTEXT]\n" + strings.Repeat("=== CHUNK 1 ===\nId: ck_1\nPath: net/http/client.go\nLines: 1-40\nLanguage: go\n```go\nfunc (c *Client) Do(req *Request) (*Response, error) { return c.do(req) }\n```\n\n", 60)
	body, err := json.Marshal(map[string]any{"model": "m", "input": []any{
		map[string]any{"type": "message", "role": "system", "content": []any{map[string]any{"type": "input_text", "text": "You are a senior Go reviewer."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "[MODE: ANALYZE]\n\n[INSTRUCTION]\nExplain"},
			map[string]any{"type": "input_text", "text": ctx}}}},
		"tools": []any{map[string]any{"type": "function", "name": "ddr", "parameters": map[string]any{"type": "object"}, "strict": true}}})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func BenchmarkRequest(b *testing.B) {
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Request(body, profiles.Chat{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResponse(b *testing.B) {
	reply := []byte(`{"id":"c","created":1,"model":"m","choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("word ", 100) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3000,"completion_tokens":100}}`)
	for b.Loop() {
		if _, err := Response(reply); err != nil {
			b.Fatal(err)
		}
	}
}
