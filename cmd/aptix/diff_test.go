package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// TestDiffTwoTurns compares a turn with its replay on another backend and
// model: the same chunks, a different backend/model row, the body's model
// as the one JSON difference, and both texts.
func TestDiffTwoTurns(t *testing.T) {
	d := newDebugStack(t)
	orig := d.turn(contracts.AgentExecuteRequest{ConversationId: "c-d", TurnId: "d1", Mode: "ANALYZE", Instruction: "Explain the retry policy"})
	d.replay(replayFlags{conversation: "c-d", turn: "d1", from: "llmcaller", backend: "other", model: "other-1", newTurn: "d1-other"})

	a, err := history.LoadTurn(d.ctx(), d.js, "", "d1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := history.LoadTurn(d.ctx(), d.js, "", "d1-other")
	if err != nil {
		t.Fatal(err)
	}
	if a.Conversation != "c-d" || b.Conversation != "c-d" || len(a.Turns) != 4 || len(b.Turns) != 3 {
		t.Fatalf("views: %s %d stages, %s %d stages", a.Conversation, len(a.Turns), b.Conversation, len(b.Turns))
	}
	var out bytes.Buffer
	if err := printDiff(&out, a, b); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Logf("\n%s", s)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`retrieved\s+chunks\s+ck_retry,ck_backoff\s+-\s+≠`), // the replay started at the llmcaller
		regexp.MustCompile(`enveloped\s+backend/model\s+sandbox/sandbox-1\s+other/other-1\s+≠`),
		regexp.MustCompile(`enveloped\s+sources\s+ck_retry,ck_backoff\s+ck_retry,ck_backoff\s*\n`),
		regexp.MustCompile(`completed\s+kind/finish\s+ok/stop\s+ok/stop\s*\n`),
		regexp.MustCompile(`completed\s+model\s+sandbox-1\s+other-1\s+≠`),
		regexp.MustCompile(`(?m)^UPSTREAM REQUEST BODY.*\n  ~ model: "sandbox-1" → "other-1"\n\n`),
		regexp.MustCompile(`--- T1\n` + regexp.QuoteMeta(orig.Response.Text) + `\n\+\+\+ T2\nAnswer from the other backend.\n`),
	} {
		if !want.MatchString(s) {
			t.Errorf("diff output lacks %s", want)
		}
	}
	// A turn against itself: no ≠ outside the timings.
	out.Reset()
	if err := printDiff(&out, a, a); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "≠") {
			t.Errorf("a turn differs from itself: %s", line)
		}
	}
	if !strings.Contains(out.String(), "  identical\n") || !strings.Contains(out.String(), "identical (") {
		t.Errorf("self-diff:\n%s", out.String())
	}
}
