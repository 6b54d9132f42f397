package pipeline

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestAdmissionKnowsEveryStage: admission estimates what each turn inside
// APTIX still adds from the stage it waits at, so every declared stage
// consuming from APTIX needs its estimate (and no other name has one).
func TestAdmissionKnowsEveryStage(t *testing.T) {
	for _, st := range layout.Stages {
		_, ok := eventsLeft[st.Name]
		if inside := contracts.StreamOf(st.In) == contracts.StreamName; inside != ok {
			t.Errorf("%s: consumes from %s, has an admission estimate: %v", st.Name, contracts.StreamOf(st.In), ok)
		}
	}
	for name := range eventsLeft {
		if _, ok := layout.StageByName(name); !ok {
			t.Errorf("admission estimate for %s, which is not a declared stage", name)
		}
	}
}
