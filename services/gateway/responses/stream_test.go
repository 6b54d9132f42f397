package responses

import (
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
