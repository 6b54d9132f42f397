package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStreamerDropsRelayedRepeats: after a crash the LLM caller
// re-attaches to the upstream response and relays its deltas again from the
// start with the same upstreamSeq; the client sees each piece of text once.
func TestStreamerDropsRelayedRepeats(t *testing.T) {
	s := NewStreamer()
	var text strings.Builder
	deltas := 0
	feed := func(seqs ...int) {
		for _, n := range seqs {
			for _, ev := range s.Delta(Delta{Type: "text", ItemID: "msg_1", Text: string(rune('a' + n - 1)), UpstreamSeq: n}) {
				if ev.Type == "response.output_text.delta" {
					text.WriteString(ev.Data["delta"].(string))
					deltas++
				}
			}
		}
	}
	feed(1, 2, 3)    // before the crash
	feed(1, 2, 3, 4) // the re-attached call relays from the start
	if got := text.String(); got != "abcd" || deltas != 4 {
		t.Fatalf("client saw %q in %d deltas, want abcd in 4", got, deltas)
	}
	// Deltas without an upstream sequence (a plain call) are all shown.
	plain := NewStreamer()
	n := 0
	for range 3 {
		n += len(plain.Delta(Delta{Type: "text", ItemID: "m", Text: "x"}))
	}
	if n != 3+2 { // the first delta also adds the item and its part
		t.Fatalf("%d events for 3 plain deltas", n)
	}
}

// TestStreamerItemStatus: an item the live stream never showed is added
// and done in OpenAI's shape: a type with a status (message,
// function_call) starts in_progress; one without (mcp_approval_request,
// compaction) gets none in either event.
func TestStreamerItemStatus(t *testing.T) {
	for _, tc := range []struct {
		name, item string
		status     bool
	}{
		{"message", `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}`, true},
		{"function_call", `{"id":"fc_1","type":"function_call","status":"completed","call_id":"c","name":"f","arguments":"{}"}`, true},
		{"mcp_approval_request", `{"id":"mcpr_1","type":"mcp_approval_request","server_label":"calc","name":"add","arguments":"{}"}`, false},
		{"compaction", `{"id":"cmp_1","type":"compaction","encrypted_content":"x"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamer()
			evs := s.Finish(Response{ID: "resp_1", Status: StatusCompleted, Output: []json.RawMessage{json.RawMessage(tc.item)}})
			seen := 0
			for _, ev := range evs {
				if ev.Type != "response.output_item.added" && ev.Type != "response.output_item.done" {
					continue
				}
				seen++
				b, _ := json.Marshal(ev.Data["item"])
				var item map[string]any
				_ = json.Unmarshal(b, &item)
				st, has := item["status"]
				if has != tc.status || (ev.Type == "response.output_item.added" && has && st != "in_progress") {
					t.Fatalf("%s: item %s", ev.Type, b)
				}
			}
			if seen != 2 {
				t.Fatalf("%d item events: %+v", seen, evs)
			}
		})
	}
}
