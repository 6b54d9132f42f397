package contracts

import (
	"strings"
	"testing"
)

// TestTurnConversation: a turn id names the same conversation every time,
// a valid id that leaves room for the gateway's per-principal prefix.
func TestTurnConversation(t *testing.T) {
	if got := TurnConversation("t1"); got != "c-t1" || TurnConversation("t1") != got {
		t.Fatalf("short id: %q", got)
	}
	long := strings.Repeat("a", MaxIDLen)
	got := TurnConversation(long)
	if got != TurnConversation(long) || got == TurnConversation(long[1:]) || !IsToken(got) || len(got)+15 > MaxIDLen {
		t.Fatalf("long id: %q", got)
	}
	if edge := strings.Repeat("b", turnConversationMax); !IsToken(TurnConversation(edge)) || len(TurnConversation(edge))+15 > MaxIDLen {
		t.Fatalf("id of %d: %q", turnConversationMax, TurnConversation(edge))
	}
}
