package stage

import "testing"

// TestResultKeyNamesTheConversation: a finished tool call is recorded under
// its conversation, turn, round and call id, so another conversation's turn
// of the same id (and call id) never reads it as its own.
func TestResultKeyNamesTheConversation(t *testing.T) {
	alice, bob := ResultKey("alice", "t1", 0, "call_1"), ResultKey("bob", "t1", 0, "call_1")
	if alice != "alice.t1.0.call_1" || alice == bob {
		t.Fatalf("keys %q and %q", alice, bob)
	}
	if ResultKey("alice", "t1", 1, "call_1") == alice {
		t.Fatal("rounds share a key")
	}
	// A call id that is no key token is hashed, still under the turn's key.
	if k := ResultKey("alice", "t1", 0, "call/1 x"); len(k) != len("alice.t1.0.")+24 || k[:len("alice.t1.0.")] != "alice.t1.0." {
		t.Fatalf("hashed call id key %q", k)
	}
}
