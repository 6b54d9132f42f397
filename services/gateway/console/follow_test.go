package console

import (
	"context"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestFollowerKeepsTheNewestWindow: with more events stored than the
// window holds, the follower keeps exactly the newest windowEvents, oldest
// first, and adds new ones as they are stored.
func TestFollowerKeepsTheNewestWindow(t *testing.T) {
	e := newEnv(t)
	e.seedMany(windowEvents/4 + 10) // 4 events each: 40 more than the window
	f := &follower{js: e.js}
	t.Cleanup(f.stop)
	got, err := f.snapshot(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != windowEvents {
		t.Fatalf("%d events, want %d", len(got), windowEvents)
	}
	for i := 1; i < len(got); i++ {
		if got[i].seq != got[i-1].seq+1 {
			t.Fatalf("event %d has seq %d after %d", i, got[i].seq, got[i-1].seq)
		}
	}
	last := got[len(got)-1].seq
	if last != uint64(4*(windowEvents/4+10)) {
		t.Fatalf("newest seq %d", last)
	}
	e.turn("c-new", "t-new", "hello", "hi")
	waitFor(t, "the new turn in the window", func() bool {
		got, _ = f.snapshot(context.Background(), time.Second)
		n := got[len(got)-1]
		return len(got) == windowEvents && n.conv == "c-new" && n.stage == contracts.StageCompleted && got[0].seq == last+4-windowEvents+1
	})
}
