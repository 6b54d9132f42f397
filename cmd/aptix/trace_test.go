package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// TestTraceWaterfall: a turn's four stored events in order, offsets that
// add up, the model call recorded by the llmcaller, and the trace id of the
// turn's events.
func TestTraceWaterfall(t *testing.T) {
	d := newDebugStack(t)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-t", TurnId: "tr1", Instruction: "trace me"})
	v, err := history.LoadTurn(d.ctx(), d.js, "", "tr1")
	if err != nil {
		t.Fatal(err)
	}
	id := v.TraceOf()
	// "-" without a tracer provider (as here), else the 32-hex trace id.
	if id != "-" && len(id) != 32 {
		t.Fatalf("trace id %q", id)
	}
	var out bytes.Buffer
	if err := printTrace(&out, v, id); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Logf("\n%s", s)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "turn tr1 (conversation c-t), trace "+id) {
		t.Fatalf("trace output:\n%s", s)
	}
	for i, want := range []string{
		`^retriever\s+retrieved\s+0\.0ms\s+-\s+\|\s{40}\| first stored event; search \d+\.\dms`,
		`^envelope\s+enveloped\s+\d+\.\dms\s+\d+\.\dms\s+\|[ █]{40}\|`,
		`^llmcaller\s+responded\s+\d+\.\dms\s+\d+\.\dms\s+\|[ █]{40}\| model call \d+\.\dms, 1 attempt\(s\); waiting and overhead`,
		`^mapper\s+completed\s+\d+\.\dms\s+\d+\.\dms\s+\|[ █]*█\|`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[3+i]) {
			t.Errorf("line %d %q does not match %s", 3+i, lines[3+i], want)
		}
	}
}
