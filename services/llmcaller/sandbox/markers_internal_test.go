package sandbox

import (
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// Two identical markers in one message are two calls: their ids differ.
func TestCallIDs(t *testing.T) {
	m := reply.Marker{Name: "f", Arguments: `{"a":1}`}
	if callID(2, "t", 0, m) == callID(2, "t", 1, m) || callID(2, "t", 0, m) != callID(2, "t", 0, m) || callID(2, "t", 0, m) == callID(4, "t", 0, m) {
		t.Error("call ids must be deterministic and distinct per position and turn")
	}
}
