package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles/pricelist"
)

// TestReplayUsage: a replay from the LLM caller calls the model again and
// counts as a turn of its own, marked as a replay; a replay from the mapper
// re-maps the stored result, pays nothing, and is not counted.
func TestReplayUsage(t *testing.T) {
	d := newDebugStack(t)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-u", TurnId: "t1", Instruction: "count me"})
	calls := d.sb.Requests()
	d.replay(replayFlags{conversation: "c-u", turn: "t1", from: "mapper", newTurn: "t1-mapper"})
	if d.sb.Requests() != calls {
		t.Fatal("a replay from the mapper called the model")
	}
	d.replay(replayFlags{conversation: "c-u", turn: "t1", from: "llmcaller", newTurn: "t1-llm"})
	if d.sb.Requests() != calls+1 {
		t.Fatalf("a replay from the llmcaller made %d calls, want 1", d.sb.Requests()-calls)
	}
	u, err := store.OpenUsage(context.Background(), d.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	var rep spend.Report
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, _ := u.Pending(context.Background())
		if rep, err = u.Report(context.Background(), spend.Filter{Principal: ""}); err != nil {
			t.Fatal(err)
		}
		if (n == 0 && rep.Turns >= 2) || time.Now().After(deadline) {
			break
		}
	}
	if rep.Turns != 2 || rep.Replays != 1 || rep.Unpriced != 2 {
		t.Fatalf("totals %+v: want 2 turns (the original and the llmcaller replay), 1 replay, both unpriced", rep.Counts)
	}
	var out bytes.Buffer
	printUsage(&out, rep, spend.Filter{Principal: ""})
	for _, want := range []string{`"": 2 turn(s)`, "2 unpriced turn(s) not in the cost", "1 replay(s) among them"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("aptix usage printed %q, missing %q", out.String(), want)
		}
	}
}

// TestUsageSaysWhichPrices: aptix usage names the prices each priced
// turn was charged at: the built-in price list with its date, or a
// profile's own table.
func TestUsageSaysWhichPrices(t *testing.T) {
	list := pricelist.Builtin()
	rep := spend.Report{Counts: spend.Counts{Turns: 3}, ByPrice: map[string]spend.Counts{
		list.Version: {Turns: 2, CostNanos: 1000}, "openai-1a2b3c4d": {Turns: 1}}}
	var out bytes.Buffer
	printUsage(&out, rep, spend.Filter{All: true})
	for _, want := range []string{"PRICED AT", "built-in price list " + list.Version + " (figures of " + list.Taken + ")", "profile prices openai-1a2b3c4d"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("aptix usage printed %q, missing %q", out.String(), want)
		}
	}
}
