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
