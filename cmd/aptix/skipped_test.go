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

// TestSkippedEnvelopeShown: a transparent turn that needs nothing of the
// envelope, entered at aptix.enveloped as the gateway enters it, is shown
// as such: `aptix trace` has a "skipped" line for the retriever and the
// envelope and the entry event written by the gateway, `aptix events`
// marks it, and `aptix replay` from the retriever or from the envelope
// runs the turn through the stages it skipped, whose envelope writes the
// body the gateway wrote, byte for byte.
func TestSkippedEnvelopeShown(t *testing.T) {
	d := newDebugStack(t)
	e, err := pipeline.NewEntrance(d.nc, layout.StreamConfig{}, "gateway", pipeline.Skipping{Profiles: d.profiles})
	if err != nil {
		t.Fatal(err)
	}
	req := contracts.AgentExecuteRequest{ConversationId: "c-env", TurnId: "se1", Instruction: "hello", RagScope: contracts.RagScopeNone,
		Framing: contracts.FramingNone, NewConversation: true, AgentContext: &contracts.AgentContext{Backend: "sandbox", Model: "sandbox-1"},
		OpenAI: &contracts.OpenAIPassthrough{Input: []byte(`[{"role":"user","content":"hello"}]`), Fields: []byte(`{"temperature":0.5}`)}}
	ctx := d.ctx()
	if entry, err := e.Submit(ctx, req); err != nil || entry != contracts.StageEnveloped {
		t.Fatalf("Submit = %q, %v", entry, err)
	}
	done, err := client.Await(ctx, d.js, "c-env", "se1")
	if err != nil || done.Response == nil || done.Response.Kind == contracts.KindError {
		t.Fatalf("the turn: %+v, %v", done.Response, err)
	}
	v, err := history.LoadTurn(ctx, d.js, "c-env", "se1")
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
		`^retriever\s+-\s+-\s+-\s+skipped: the turn entered at aptix\.enveloped without it`,
		`^envelope\s+-\s+-\s+-\s+skipped: the turn entered at aptix\.enveloped without it`,
		`^gateway\s+enveloped\s+0\.0ms\s+-\s+\|\s{40}\| first stored event; entry event: retriever, envelope skipped$`,
		`^llmcaller\s+responded\s`,
		`^mapper\s+completed\s`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[3+i]) {
			t.Errorf("line %d %q does not match %s", 3+i, lines[3+i], want)
		}
	}
	evs, err := history.ConversationEvents(ctx, d.js, "c-env")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := listEvents(&out, "c-env", evs); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)\senveloped\s+se1\s+\d+\s+\S+\s+retriever, envelope: skipped$`).MatchString(out.String()) || strings.Contains(out.String(), "retrieved") {
		t.Errorf("aptix events does not mark the entry event, or lists a retrieved event:\n%s", out.String())
	}
	if turns, err := history.ConversationTurns(ctx, d.js, "c-env", true); err != nil || len(turns) != 1 || turns[0] != "se1" {
		t.Errorf("the conversation's turns %v, %v; want [se1]", turns, err)
	}

	for _, from := range []string{"retriever", "envelope"} {
		again := "se1-" + from
		var rout, rerr bytes.Buffer
		got, err := replayTurn(ctx, d.js, replayFlags{conversation: "c-env", turn: "se1", from: from, newTurn: again}, &rout, &rerr)
		if err != nil {
			t.Fatalf("replay --from %s of a turn that skipped the envelope: %v\n%s", from, err, rerr.String())
		}
		if got.Response == nil || got.Response.Kind == contracts.KindError {
			t.Fatalf("replay --from %s: %+v", from, got.Response)
		}
		if from == "retriever" && !strings.Contains(rerr.String(), "turn se1 skipped the retriever, envelope") {
			t.Errorf("replay stderr does not say the original skipped both:\n%s", rerr.String())
		}
		if h := d.header(contracts.Subject(contracts.StageEnveloped, "c-env", again), contracts.HeaderCESource); h != "aptix/envelope" {
			t.Errorf("the replay's enveloped event is from %q, want the envelope", h)
		}
		rv, err := history.LoadTurn(ctx, d.js, "c-env", again)
		if err != nil {
			t.Fatal(err)
		}
		orig, ran := v.Turns[contracts.StageEnveloped].Envelope, rv.Turns[contracts.StageEnveloped].Envelope
		if orig == nil || ran == nil || !bytes.Equal(orig.Body, ran.Body) || orig.Backend != ran.Backend || orig.Model != ran.Model {
			t.Errorf("replay --from %s: the envelope wrote %+v, the gateway %+v", from, ran, orig)
		}
	}
}
