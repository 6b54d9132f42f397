package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestTruncationAuto: with a context window on the profile, a request with
// truncation "auto" whose replayed history (Codex's store:false shape) does
// not fit has its oldest items dropped before the call, and the response
// says how many (truncated_input_items); "disabled" sends everything.
func TestTruncationAuto(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.ContextWindow = 600
		c.Profiles.Put(p)
	})
	url, _ := e.gateway()
	pad := strings.Repeat("lorem ipsum ", 60) // ~180 tokens an item at 4 bytes a token
	body := func(truncation string) []byte {
		b, _ := json.Marshal(map[string]any{
			"model": "sandbox-1", "instructions": "Be brief.", "store": false, "stream": true, "truncation": truncation,
			"input": []any{
				map[string]any{"type": "message", "role": "user", "content": "oldest question " + pad},
				map[string]any{"type": "message", "role": "assistant", "content": "oldest answer " + pad},
				map[string]any{"type": "message", "role": "user", "content": "recent question " + pad},
				map[string]any{"type": "message", "role": "assistant", "content": "recent answer"},
				map[string]any{"type": "message", "role": "user", "content": "Reply with exactly: truncated-ok"},
			},
		})
		return b
	}
	final, _ := codexSSE(t, url, body("auto"))
	var r struct {
		Status     string `json:"status"`
		Truncated  int    `json:"truncated_input_items"`
		Truncation string `json:"truncation"`
	}
	_ = json.Unmarshal(final, &r)
	sent := string(e.sb.LastRequest())
	if r.Status != "completed" || r.Truncated != 1 || r.Truncation != "auto" {
		t.Fatalf("response: %s", final)
	}
	// The oldest item goes; the next fits.
	if strings.Contains(sent, "oldest question") || !strings.Contains(sent, "oldest answer") ||
		!strings.Contains(sent, "recent question") || !strings.Contains(sent, "Be brief.") || !strings.Contains(sent, "truncated-ok") {
		t.Fatalf("upstream input: %s", sent)
	}
	final, _ = codexSSE(t, url, body("disabled"))
	r.Truncated = -1
	_ = json.Unmarshal(final, &r)
	if r.Truncated != -1 && r.Truncated != 0 || !strings.Contains(string(e.sb.LastRequest()), "oldest question") {
		t.Fatalf("disabled truncated: %s", final)
	}
}
