package layout

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestDerivedLists: the lists derived from Stages are the ones the
// commands, pages and estimates wrote by hand before (for today's
// topology), so deriving them changed nothing.
func TestDerivedLists(t *testing.T) {
	if got, want := MainNames(), []string{"retriever", "envelope", "llmcaller", "mapper"}; !slices.Equal(got, want) {
		t.Errorf("MainNames %v, want %v", got, want)
	}
	if got := EventStages(); !slices.Equal(got, contracts.Stages) {
		t.Errorf("EventStages %v, want contracts.Stages %v", got, contracts.Stages)
	}
	for event, want := range map[string]string{contracts.StageRetrieved: "retriever", contracts.StageEnveloped: "envelope", contracts.StageResponded: "llmcaller", contracts.StageCompleted: "mapper", contracts.StageRequested: "", contracts.StageToolRound: ""} {
		if got, ok := ProducerOf(event); got != want || ok != (want != "") {
			t.Errorf("ProducerOf(%s) = %q %v, want %q", event, got, ok, want)
		}
	}
	for name, want := range map[string]int{"retriever": 4, "envelope": 3, "llmcaller": 2, "mapper": 1, "toolrunner": 3, "no-such-stage": 0} {
		if got := EventsToEnd(name); got != want {
			t.Errorf("EventsToEnd(%s) = %d, want %d", name, got, want)
		}
	}
	if got, want := fmt.Sprint(StopOrder()), "[[retriever] [envelope] [llmcaller toolrunner] [mapper]]"; got != want {
		t.Errorf("StopOrder %s, want %s", got, want)
	}
}

// TestStopOrderUpstreamFirst: every stage stops after every stage that
// feeds it, except those it feeds back (which stop with it), and every
// declared stage is in exactly one group.
func TestStopOrderUpstreamFirst(t *testing.T) {
	at := map[string]int{}
	for i, g := range StopOrder() {
		for _, name := range g {
			if _, dup := at[name]; dup {
				t.Errorf("%s in two groups", name)
			}
			at[name] = i
		}
	}
	for _, a := range Stages {
		if _, ok := at[a.Name]; !ok {
			t.Errorf("%s stops in no group", a.Name)
		}
		for _, b := range Stages {
			if slices.Contains(a.Emits(), b.In) && at[a.Name] > at[b.Name] {
				t.Errorf("%s feeds %s but stops after it", a.Name, b.Name)
			}
		}
	}
}

// TestMainLineWithATestTopology: the derivations follow the declarations,
// not the stage names: a stage added between two others appears in every
// list, in its place.
func TestMainLineWithATestTopology(t *testing.T) {
	saved := Stages
	t.Cleanup(func() { Stages = saved })
	Stages = []StageSpec{
		{Name: "b", In: "mid", Out: contracts.StageCompleted},
		{Name: "a", In: contracts.StageRequested, Out: "mid", Routes: []string{"side"}},
		{Name: "side", In: "side", Out: "mid"},
	}
	if got := MainNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("MainNames %v", got)
	}
	if got := EventStages(); !slices.Equal(got, []string{contracts.StageRequested, "mid", contracts.StageCompleted}) {
		t.Errorf("EventStages %v", got)
	}
	if got, want := fmt.Sprint(StopOrder()), "[[a] [side] [b]]"; got != want {
		t.Errorf("StopOrder %s, want %s", got, want)
	}
	if EventsToEnd("side") != 2 || EventsToEnd("a") != 2 {
		t.Errorf("EventsToEnd side %d a %d", EventsToEnd("side"), EventsToEnd("a"))
	}
}
