package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestSkippedRetrieverShown: a turn with no retrieval, entered past the
// retriever as the gateway enters it, is shown as such everywhere history
// is read: `aptix trace` has a "retriever ... skipped" line and the entry
// event written by the gateway (no invented retriever event, no search
// time), `aptix events` marks the entry event, and `aptix replay --from
// retriever` of it says so and runs it through the retriever.
func TestSkippedRetrieverShown(t *testing.T) {
	d := newDebugStack(t)
	e, err := pipeline.NewEntrance(d.nc, layout.StreamConfig{}, "gateway", pipeline.Skipping{})
	if err != nil {
		t.Fatal(err)
	}
	req := contracts.AgentExecuteRequest{ConversationId: "c-skip", TurnId: "sk1", Instruction: "no retrieval", RagScope: contracts.RagScopeNone}
	ctx := d.ctx()
	if entry, err := e.Submit(ctx, req); err != nil || entry != contracts.StageRetrieved {
		t.Fatalf("Submit = %q, %v", entry, err)
	}
	if _, err := client.Await(ctx, d.js, "c-skip", "sk1"); err != nil {
		t.Fatal(err)
	}
	if n := d.searches.Load(); n != 0 {
		t.Fatalf("%d searches for a turn that skipped the retriever", n)
	}
	v, err := history.LoadTurn(ctx, d.js, "c-skip", "sk1")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTrace(&out, v, v.TraceOf()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Logf("\n%s", s)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 8 {
		t.Fatalf("trace output:\n%s", s)
	}
	for i, want := range []string{
		`^retriever\s+-\s+-\s+-\s+skipped: the turn entered at aptix\.retrieved without it`,
		`^gateway\s+retrieved\s+0\.0ms\s+-\s+\|\s{40}\| first stored event; entry event: retriever skipped$`,
		`^envelope\s+enveloped\s`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[3+i]) {
			t.Errorf("line %d %q does not match %s", 3+i, lines[3+i], want)
		}
	}

	evs, err := history.ConversationEvents(ctx, d.js, "c-skip")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := listEvents(&out, "c-skip", evs); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)\sretrieved\s+sk1\s+\d+\s+\S+\s+retriever: skipped$`).MatchString(out.String()) || strings.Count(out.String(), "retriever: skipped") != 1 {
		t.Errorf("aptix events does not mark the entry event once:\n%s", out.String())
	}

	var rout, rerr bytes.Buffer
	got, err := replayTurn(ctx, d.js, replayFlags{conversation: "c-skip", turn: "sk1", from: "retriever", newTurn: "sk1-again"}, &rout, &rerr)
	if err != nil {
		t.Fatalf("replay --from retriever of a skipped turn: %v\n%s", err, rerr.String())
	}
	if !strings.Contains(rerr.String(), "turn sk1 skipped the retriever") {
		t.Errorf("replay stderr does not say the original skipped the retriever:\n%s", rerr.String())
	}
	if got.Retrieval == nil || got.Retrieval.Scope != contracts.RagScopeNone {
		t.Errorf("the replay's retrieval %+v", got.Retrieval)
	}
	if h := d.header(contracts.Subject(contracts.StageRetrieved, "c-skip", "sk1-again"), contracts.HeaderCESource); h != "aptix/retriever" {
		t.Errorf("the replay's retrieved event is from %q, want the retriever", h)
	}
}
