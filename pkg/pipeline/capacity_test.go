package pipeline

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestAdmissionKnowsEveryStage: admission estimates what each turn inside
// APTIX still adds from the stage it waits at, so every declared stage
// consuming from APTIX needs an estimate, and a new turn adds an event per
// stage that stores one.
func TestAdmissionKnowsEveryStage(t *testing.T) {
	for _, st := range layout.Stages {
		if contracts.StreamOf(st.In) == contracts.StreamName && eventsLeft(st.Name) <= 0 {
			t.Errorf("%s: consumes from %s and has no admission estimate", st.Name, contracts.StreamName)
		}
	}
	if eventsPerTurn != 4 || eventsLeft("envelope") != 3 || eventsLeft("toolrunner") != 3 || eventsLeft("mapper") != 1 {
		t.Errorf("a turn adds %d events, %d from the envelope, %d from the toolrunner, %d from the mapper; want 4, 3, 3, 1",
			eventsPerTurn, eventsLeft("envelope"), eventsLeft("toolrunner"), eventsLeft("mapper"))
	}
}
