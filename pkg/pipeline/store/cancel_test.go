package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// eventually waits up to 5 s for cond, reading c's state under its lock.
func eventually(t *testing.T, c *Cancels, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}

// synced waits until c's watch has delivered every stored cancel.
func synced(t *testing.T, c *Cancels) {
	t.Helper()
	eventually(t, c, "the cancels watch never caught up", func() bool { return c.synced })
}

// openCancels opens the cancels store on js, closed when the test ends.
func openCancels(t *testing.T, js jetstream.JetStream) *Cancels {
	t.Helper()
	c, err := OpenCancels(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestCancelsWatchSeesEveryCancel: a cancel stored before the process
// started, one stored while a turn is registered, and cancels racing their
// turns' Watch from another process are each seen, by Watch's answer or by
// the abort of its context; a turn nobody cancelled is left alone.
func TestCancelsWatchSeesEveryCancel(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	other := openCancels(t, js)
	if _, err := other.CancelFor(ctx, "c", "before", "timeout"); err != nil {
		t.Fatal(err)
	}
	c := openCancels(t, js)
	synced(t, c)

	if _, _, reason, ok, err := c.Watch(ctx, "c", "before"); err != nil || !ok || reason != "timeout" {
		t.Fatalf("a cancel stored before the process: ok %v reason %q err %v", ok, reason, err)
	}
	tctx, release, _, ok, err := c.Watch(ctx, "c", "during")
	if err != nil || ok {
		t.Fatalf("an uncancelled turn: ok %v err %v", ok, err)
	}
	defer release()
	if _, err := other.Cancel(ctx, "c", "during"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tctx.Done():
		if !errors.Is(context.Cause(tctx), ErrCancelled) {
			t.Fatalf("cause %v", context.Cause(tctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancel stored during the turn did not abort it")
	}

	// Racing: each cancel is stored at about the moment its turn is watched.
	const n = 300
	var wg sync.WaitGroup
	seen := make([]bool, n)
	for i := range n {
		id := fmt.Sprintf("race-%d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := other.Cancel(ctx, "c", id); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			tctx, release, _, ok, err := c.Watch(ctx, "c", id)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				seen[i] = true
				return
			}
			defer release()
			select {
			case <-tctx.Done():
				seen[i] = errors.Is(context.Cause(tctx), ErrCancelled)
			case <-time.After(10 * time.Second):
			}
		}()
	}
	wg.Wait()
	for i, ok := range seen {
		if !ok {
			t.Fatalf("race-%d: its cancel was lost", i)
		}
	}

	calm, release, _, ok, err := c.Watch(ctx, "c", "calm")
	if err != nil || ok {
		t.Fatalf("calm: ok %v err %v", ok, err)
	}
	defer release()
	select {
	case <-calm.Done():
		t.Fatalf("an uncancelled turn was aborted: %v", context.Cause(calm))
	case <-time.After(100 * time.Millisecond):
	}
}

// TestCancelsWatchAfterOverflow: past maxKnown cancels the process stops
// remembering them and Watch reads the bucket, so none is missed.
func TestCancelsWatchAfterOverflow(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	c := openCancels(t, js)
	synced(t, c)
	c.mu.Lock()
	c.limit = 3
	c.mu.Unlock()
	for i := range 5 {
		if _, err := c.Cancel(ctx, "c", fmt.Sprintf("t%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, c, "no overflow after 5 cancels with a limit of 3", func() bool { return c.overflow })
	for i := range 5 {
		if _, _, _, ok, err := c.Watch(ctx, "c", fmt.Sprintf("t%d", i)); err != nil || !ok {
			t.Fatalf("t%d after overflow: ok %v err %v", i, ok, err)
		}
	}
	if _, release, _, ok, err := c.Watch(ctx, "c", "never"); err != nil || ok {
		t.Fatalf("never: ok %v err %v", ok, err)
	} else {
		release()
	}
}

// TestCancelsWatchAfterTheWatchEnds: once the watch has ended, Watch reads
// the bucket again instead of trusting what the watch last knew.
func TestCancelsWatchAfterTheWatchEnds(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	c, err := OpenCancels(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	synced(t, c)
	c.Close()
	eventually(t, c, "the ended watch is still trusted", func() bool { return !c.synced })
	other := openCancels(t, js)
	if _, err := other.Cancel(ctx, "c", "late"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok, err := c.Watch(ctx, "c", "late"); err != nil || !ok {
		t.Fatalf("a cancel stored after the watch ended: ok %v err %v", ok, err)
	}
}

// TestCancelsScopedByConversation: a cancel is the turn's of its
// conversation: cancelling one conversation's turn neither aborts nor
// pre-empts another conversation's turn of the same id.
func TestCancelsScopedByConversation(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	c := openCancels(t, js)
	synced(t, c)
	bob, release, _, ok, err := c.Watch(ctx, "bob", "t1")
	if err != nil || ok {
		t.Fatalf("bob's turn: ok %v err %v", ok, err)
	}
	defer release()
	if _, err := c.Cancel(ctx, "alice", "t1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, c, "alice's cancel never arrived", func() bool { _, ok := c.known[contracts.TurnKey("alice", "t1")]; return ok })
	select {
	case <-bob.Done():
		t.Fatalf("alice's cancel aborted bob's turn of the same id: %v", context.Cause(bob))
	case <-time.After(100 * time.Millisecond):
	}
	if _, ok, err := c.Cancelled(ctx, "bob", "t1"); err != nil || ok {
		t.Fatalf("bob's turn reads as cancelled: %v %v", ok, err)
	}
	if _, _, _, ok, err := c.Watch(ctx, "alice", "t1"); err != nil || !ok {
		t.Fatalf("alice's turn: ok %v err %v", ok, err)
	}
}
