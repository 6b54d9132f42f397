package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestProvisionStagesNamesWhatItMade: the consumers ProvisionStages reports
// are the ones on the server, one per declared stage.
func TestProvisionStagesNamesWhatItMade(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	made, err := ProvisionStages(ctx, js, layout.StreamConfig{}, SubscriberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var onServer []string
	for _, stream := range []string{contracts.QueueStreamName, contracts.StreamName} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.ConsumerNames(ctx).Name() {
			onServer = append(onServer, name)
		}
	}
	slices.Sort(made)
	slices.Sort(onServer)
	if !slices.Equal(made, onServer) || len(made) != len(layout.Stages) {
		t.Fatalf("reported %v, on the server %v, %d stages", made, onServer, len(layout.Stages))
	}
	for _, st := range layout.Stages {
		if !slices.Contains(made, layout.Durable(st.Name)) {
			t.Errorf("no consumer for %s", st.Name)
		}
	}
}

// TestProvisionKeepsTheLocalCap: the consumers provision writes for the
// stages that wait only on the bus carry the cap those stages set
// themselves when they start, so a provision run and a stage start never
// undo each other; a model stage keeps the deployment's setting.
func TestProvisionKeepsTheLocalCap(t *testing.T) {
	sc := SubscriberConfig{MaxAckPending: 5000}
	for _, st := range layout.Stages {
		got := ConsumerConfig(st.Name, st.In, sc).MaxAckPending
		want := 5000
		if st.Local {
			want = LocalMaxAckPending
		}
		if got != want {
			t.Errorf("%s: provisioned MaxAckPending %d, want %d", st.Name, got, want)
		}
	}
	if !isLocal(Stage{Name: "envelope"}) || isLocal(Stage{Name: "llmcaller"}) {
		t.Fatal("the topology's local stages are not the runtime's")
	}
}
