package pipeline

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// A Local stage takes no more than LocalMaxAckPending events at once, even
// when the deployment's MaxAckPending (sized for the model stages) is far
// larger; a stage that is not Local keeps the deployment's setting. (The
// stage is one the topology does not name, so Stage.Local alone decides;
// the topology's own local stages are checked by
// TestProvisionKeepsTheLocalCap.)
func TestLocalStageCapsEventsInFlight(t *testing.T) {
	for _, local := range []bool{true, false} {
		nc, js := natstest.JetStream(t)
		const turns = LocalMaxAckPending + 64
		var inFlight, peak atomic.Int64
		release := make(chan struct{})
		handle := func(ctx context.Context, _ *contracts.Turn) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, nc, Stage{Name: "localtest", In: contracts.StageRequested, Out: contracts.StageRetrieved, Handle: handle, Local: local},
				Options{Subscriber: SubscriberConfig{MaxAckPending: 4 * turns}, Logger: quiet, Ready: ready})
		}()
		<-ready
		for i := range turns {
			req := contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t" + strconv.Itoa(i), Instruction: "x"}
			if err := client.Submit(context.Background(), js, req); err != nil {
				t.Fatal(err)
			}
		}
		want := int64(turns)
		if local {
			want = LocalMaxAckPending
		}
		deadline := time.Now().Add(10 * time.Second)
		for peak.Load() < want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // a stage over its cap would take more by now
		if got := peak.Load(); got != want {
			t.Errorf("local=%v: %d events handled at once, want %d", local, got, want)
		}
		c, err := js.Consumer(context.Background(), contracts.QueueStreamName, layout.Durable("localtest"))
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if local && info.Config.MaxAckPending != LocalMaxAckPending {
			t.Errorf("local stage's consumer: MaxAckPending %d, want %d", info.Config.MaxAckPending, LocalMaxAckPending)
		}
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
