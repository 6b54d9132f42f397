package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestQueueKeeperStopsBlockChurn: turns taken one at a time used to empty
// the request queue's newest storage block on every acknowledgement, and
// nats-server replaced it with a new file each time. With the keeper, 40
// turns leave the queue in its first block, holding only the keeper.
func TestQueueKeeperStopsBlockChurn(t *testing.T) {
	srv, url := natstest.Start(t)
	nc, js := natstest.Connect(t, url)
	runStage(t, nc, func(context.Context, *contracts.Turn) error { return nil }, SubscriberConfig{AckWait: 5 * time.Second})
	for i := range 40 {
		turn := "t" + strconv.Itoa(i)
		submit(t, js, turn)
		next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", turn))
	}
	q, err := js.Stream(context.Background(), contracts.QueueStreamName)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := q.Info(context.Background(), jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 1 && info.State.Subjects[contracts.QueueKeeperSubject] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d messages %v, want only the keeper", info.State.Msgs, info.State.Subjects)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := filepath.Join(srv.JetStreamConfig().StoreDir, "$G", "streams", contracts.QueueStreamName, "msgs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	highest := 0
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".blk")); err == nil && n > highest {
			highest = n
		}
	}
	if highest > 2 {
		t.Fatalf("the queue's newest block is number %d after 40 turns: a block per request", highest)
	}
}
