package bench

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestCutAt: a write stored after the answer but before the listing that
// followed it is moved to after the answer, by the server's message times;
// a KV value replaced since is counted before it.
func TestCutAt(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.JetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	pub := func(subj string) {
		if _, err := js.Publish(ctx, subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	pub("ev.a")
	if _, err := kv.Put(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	start, err := storedSeqs(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	pub("ev.b")
	if _, err := kv.Put(ctx, "other", []byte("1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	answer := time.Now()
	time.Sleep(2 * time.Millisecond)
	pub("ev.c")
	pub("ev.d")
	if _, err := kv.Put(ctx, "k", []byte("2")); err != nil {
		t.Fatal(err)
	}
	listed, err := streamStates(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := cutAt(ctx, js, start, listed, answer)
	if err != nil {
		t.Fatal(err)
	}
	if cut["EV"] != 2 || cut["KV_b"] != 2 {
		t.Fatalf("cut at %v, want EV 2 and KV_b 2 (listed %v)", cut, seqsOf(listed))
	}
	// A value written after the answer and replaced since has no time left
	// to read: the walk stops there and counts it, and all below it, as
	// before the answer (never fewer than were).
	for _, v := range []string{"1", "2"} {
		if _, err := kv.Put(ctx, "z", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	listed, err = streamStates(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if cut, err = cutAt(ctx, js, start, listed, answer); err != nil {
		t.Fatal(err)
	}
	if cut["KV_b"] != 4 || cut["EV"] != 2 {
		t.Fatalf("cut at %v, want KV_b 4 and EV 2 (listed %v)", cut, seqsOf(listed))
	}
}
