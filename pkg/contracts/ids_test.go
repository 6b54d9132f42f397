package contracts

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateIDs(t *testing.T) {
	long := strings.Repeat("a", MaxIDLen)
	for _, ok := range [][2]string{{"c1", "t1"}, {"c-01a2_B", "01a206bb-a2b3-74c2-916c-8e15f51a9412"}, {long, long}} {
		if err := ValidateIDs(ok[0], ok[1]); err != nil {
			t.Errorf("ValidateIDs(%q, %q) = %v, want nil", ok[0], ok[1], err)
		}
	}
	for _, c := range []struct{ conv, turn, field, why string }{
		{"", "t", "conversationId", "empty"},
		{"c", "", "turnId", "empty"},
		{"*", "t", "conversationId", "wildcard"},
		{"c", ">", "turnId", "wildcard"},
		{"a>b", "t", "conversationId", "wildcard"},
		{"c", "a.b", "turnId", "dot"},
		{"c d", "t", "conversationId", "whitespace"},
		{"c", "t\n", "turnId", "whitespace"},
		{"c", "t\t", "turnId", "whitespace"},
		{long + "a", "t", "conversationId", "longer than 128"},
		{"c", "ü", "turnId", "outside"},
	} {
		err := ValidateIDs(c.conv, c.turn)
		var v *ValidationError
		if !errors.As(err, &v) || len(v.Fields) != 1 || v.Fields[0].Field != c.field || !strings.Contains(v.Fields[0].Message, c.why) {
			t.Errorf("ValidateIDs(%q, %q) = %v; want one %s error mentioning %q", c.conv, c.turn, err, c.field, c.why)
		}
	}
	if err := ValidateIDs(">", "*"); err == nil || !strings.Contains(err.Error(), "conversationId") || !strings.Contains(err.Error(), "turnId") {
		t.Errorf("both bad: %v", err)
	}
}

func TestTurnSubject(t *testing.T) {
	s, err := TurnSubject(StageCompleted, "c1", "t1")
	if err != nil || s != "aptix.completed.c1.t1" {
		t.Fatalf("%q %v", s, err)
	}
	for _, bad := range [][3]string{{StageCompleted, "bad", ">"}, {StageRequested, "a.b", "t"}, {"dead", "c", "t"}, {"", "c", "t"}} {
		if s, err := TurnSubject(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("TurnSubject(%q, %q, %q) = %q, want an error", bad[0], bad[1], bad[2], s)
		}
	}
}

// TestTurnKeysNameTheConversation: every per-turn key and id names the
// conversation as well as the turn, so one conversation's turn never
// shares a record or a de-duplicated id with another's of the same turn id,
// and a tool-loop round's key is no turn's key.
func TestTurnKeysNameTheConversation(t *testing.T) {
	a := &Turn{ConversationId: "alice", TurnId: "t1"}
	b := &Turn{ConversationId: "bob", TurnId: "t1"}
	if TurnKey("alice", "t1") != "alice.t1" || TurnKey("alice", "t1") == TurnKey("bob", "t1") {
		t.Fatalf("turn keys %q %q", TurnKey("alice", "t1"), TurnKey("bob", "t1"))
	}
	if CallKey(a) == CallKey(b) || EventMsgID(a, StageResponded) == EventMsgID(b, StageResponded) || MsgID("alice", "t1", StageRequested) == MsgID("bob", "t1", StageRequested) {
		t.Fatalf("shared: call keys %q %q, msg ids %q %q", CallKey(a), CallKey(b), EventMsgID(a, StageResponded), EventMsgID(b, StageResponded))
	}
	// Ids cannot hold a dot, so no pair of ids builds another pair's key.
	if TurnKey("a-b", "c") == TurnKey("a", "b-c") || ValidateIDs("a.b", "c") == nil {
		t.Fatal("ambiguous turn key")
	}
	round := &Turn{ConversationId: "alice", TurnId: "t1", Tools: &ToolLoop{Round: 1, Step: 2}}
	named := &Turn{ConversationId: "alice", TurnId: "t1_r1"}
	if CallKey(round) != "alice.t1.r1" || CallKey(round) == CallKey(named) {
		t.Fatalf("round key %q, a turn named like it %q", CallKey(round), CallKey(named))
	}
	if EventMsgID(round, StageEnveloped) != "alice.t1.enveloped.2" {
		t.Fatalf("round msg id %q", EventMsgID(round, StageEnveloped))
	}
}
