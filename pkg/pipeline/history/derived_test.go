package history

import (
	"maps"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestListsFromTheTopology: replay's choices, the stored stages and their
// producers follow layout.Stages and are what they were written as before.
func TestListsFromTheTopology(t *testing.T) {
	want := map[string]string{
		"requested": contracts.StageRequested, "retriever": contracts.StageRequested,
		"envelope": contracts.StageRetrieved, "llmcaller": contracts.StageEnveloped, "mapper": contracts.StageResponded,
	}
	if !maps.Equal(ReplayInput, want) {
		t.Errorf("ReplayInput %v, want %v", ReplayInput, want)
	}
	if got := ReplayChoices(); got != "retriever (or requested), envelope, llmcaller or mapper" {
		t.Errorf("ReplayChoices %q", got)
	}
	producers := map[string]string{contracts.StageRetrieved: "retriever", contracts.StageEnveloped: "envelope", contracts.StageResponded: "llmcaller", contracts.StageCompleted: "mapper"}
	if !maps.Equal(Producer, producers) || len(Stages) != 4 || Stages[0] != contracts.StageRetrieved || Stages[3] != contracts.StageCompleted {
		t.Errorf("Producer %v, Stages %v", Producer, Stages)
	}
}
