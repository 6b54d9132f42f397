package caller_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// resultStores runs a test against every ResultStore implementation.
func resultStores(t *testing.T) map[string]func(t *testing.T) caller.ResultStore {
	return map[string]func(t *testing.T) caller.ResultStore{
		"memory": func(t *testing.T) caller.ResultStore { return caller.NewMemResultStore() },
		"jetstream": func(t *testing.T) caller.ResultStore {
			_, js := startJetStream(t)
			s, err := caller.NewKVResultStore(context.Background(), js)
			if err != nil {
				t.Fatal(err)
			}
			// Creating the bucket again must be idempotent.
			if _, err := caller.NewKVResultStore(context.Background(), js); err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func TestPayOnce(t *testing.T) {
	for name, newStore := range resultStores(t) {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			ts, srv := startSandbox(t, sandbox.Options{})
			c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, Results: store})
			in := caller.Input{ConversationID: "c", TurnID: "turn-1", Body: simpleBody(t, "pay once")}
			first := c.Call(context.Background(), in)
			if first.Error != nil || first.Cached {
				t.Fatalf("first %+v", first)
			}
			stored, err := store.Get(context.Background(), "turn-1")
			if err != nil || stored == nil || stored.Body != first.Body {
				t.Fatalf("not stored before Call returned: %v %+v", err, stored)
			}
			second := c.Call(context.Background(), in)
			if !second.Cached || second.Body != first.Body || second.Attempts != first.Attempts || second.DurationMs != first.DurationMs || srv.Requests() != 1 {
				t.Fatalf("second %+v, requests %d", second, srv.Requests())
			}

			// A final error is paid for too: stored and not repeated.
			bad := caller.Input{TurnID: "turn-2", Body: []byte(`{"model":"m","input":3}`)}
			if r := c.Call(context.Background(), bad); r.Status != 400 || r.Cached {
				t.Fatalf("bad %+v", r)
			}
			if r := c.Call(context.Background(), bad); !r.Cached || r.Status != 400 || r.Error == nil || srv.Requests() != 2 {
				t.Fatalf("bad again %+v requests %d", r, srv.Requests())
			}
		})
	}
}

func TestCancelledCallIsNotStored(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{Latency: 300 * time.Millisecond})
	store := caller.NewMemResultStore()
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, Results: store})
	in := caller.Input{TurnID: "turn-c", Body: simpleBody(t, "x")}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r := c.Call(ctx, in); r.Error == nil || ctx.Err() == nil {
		t.Fatalf("want a cancelled result, got %+v", r)
	}
	if r, _ := store.Get(context.Background(), "turn-c"); r != nil {
		t.Fatalf("a cancelled result was stored: %+v", r)
	}
	if r := c.Call(context.Background(), in); r.Error != nil || r.Cached || srv.Requests() != 2 {
		t.Fatalf("retry after cancel %+v requests %d", r, srv.Requests())
	}
}

// TestConcurrentSameTurnCallsOnce races two deliveries of one turn in one
// process: only one reaches the backend, the other gets its result.
func TestConcurrentSameTurnCallsOnce(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{Latency: 200 * time.Millisecond})
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet})
	in := caller.Input{TurnID: "turn-race", Body: simpleBody(t, "x")}
	results := make(chan contracts.LLMResult, 2)
	for range 2 {
		go func() { results <- c.Call(context.Background(), in) }()
	}
	a, b := <-results, <-results
	if srv.Requests() != 1 || a.Body != b.Body || a.Cached == b.Cached || a.Error != nil {
		t.Fatalf("requests %d, cached %v/%v, errors %+v/%+v", srv.Requests(), a.Cached, b.Cached, a.Error, b.Error)
	}
	// Once the flight is over, the turn is free again (no store configured).
	if r := c.Call(context.Background(), in); r.Cached || srv.Requests() != 2 {
		t.Fatalf("after the flight: %+v requests %d", r, srv.Requests())
	}
}

// A first delivery skips the pay-once lookup; a key that is taken after all
// (a replay of a paid turn, a record an earlier consumer's delivery left) is
// still found by the call record's create-if-absent, before anything is sent.
func TestFirstDeliveryFindsTakenKey(t *testing.T) {
	for name, newStore := range resultStores(t) {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			ts, srv := startSandbox(t, sandbox.Options{})
			c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, Results: store})
			in := caller.Input{ConversationID: "c", TurnID: "turn-f", Body: simpleBody(t, "first delivery"), FirstDelivery: true}
			first := c.Call(context.Background(), in)
			if first.Error != nil || first.Cached || srv.Requests() != 1 {
				t.Fatalf("first %+v, requests %d", first, srv.Requests())
			}
			// Delivered "for the first time" again: the stored result is served.
			again := c.Call(context.Background(), in)
			if !again.Cached || again.Body != first.Body || srv.Requests() != 1 {
				t.Fatalf("again %+v, requests %d", again, srv.Requests())
			}
			// A call record without a result: the call is made once more, and
			// says so (the redelivery path), instead of silently repeating.
			recs := store.(caller.CallRecords)
			if _, err := recs.Start(context.Background(), "turn-g", caller.Started{TurnID: "turn-g", Call: 1, Attempt: 1, At: time.Now()}, 0); err != nil {
				t.Fatal(err)
			}
			in.TurnID = "turn-g"
			r := c.Call(context.Background(), in)
			if r.Error != nil || r.Cached || srv.Requests() != 2 || len(r.Warnings) == 0 {
				t.Fatalf("recorded %+v, requests %d", r, srv.Requests())
			}
		})
	}
}

// TestLegacyRecordIsNeverAnAnswer: a result stored before pay-once keys
// named the conversation (under the turn id alone, Input.LegacyKey) may be
// another conversation's turn of the same id: a redelivered call finds it,
// warns, counts a repeated call and calls the model instead of answering
// from it.
func TestLegacyRecordIsNeverAnAnswer(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	store := caller.NewMemResultStore()
	if err := store.Put(context.Background(), "turn-1", contracts.LLMResult{Status: 200, Body: `{"id":"resp_other","output":[]}`}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Results: store})
	in := caller.Input{ConversationID: "c", TurnID: contracts.TurnKey("c", "turn-1"), LegacyKey: "turn-1", Body: simpleBody(t, "mine")}
	r := c.Call(context.Background(), in)
	if r.Error != nil || r.Cached || strings.Contains(r.Body, "resp_other") || srv.Requests() != 1 {
		t.Fatalf("answered %+v with %d model calls, want a call of its own", r, srv.Requests())
	}
	if !strings.Contains(logs.String(), "legacy_key=turn-1") || c.Stats().Repeated != 1 {
		t.Fatalf("no warning of the repeated call (repeated %d): %s", c.Stats().Repeated, logs.String())
	}
	// Its own result, under its own key, answers the next redelivery.
	if again := c.Call(context.Background(), in); !again.Cached || again.Body != r.Body || srv.Requests() != 1 {
		t.Fatalf("again %+v, %d model calls", again, srv.Requests())
	}
}

// TestStoredResult: a call whose result the one calling keeps
// (Input.Stored) leaves only the call record in the result store, a lookup
// finds the result where Stored says, before the record.
func TestStoredResult(t *testing.T) {
	for name, newStore := range resultStores(t) {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			recs := store.(caller.CallRecords)
			ts, srv := startSandbox(t, sandbox.Options{})
			c := caller.New(profileSet(ts.URL, nil), caller.Options{Logger: quiet, Results: store, History: caller.NewMemHistoryStore()})
			var kept *contracts.LLMResult // where the stage would emit it
			in := caller.Input{ConversationID: "c", TurnID: "c.turn-s", Body: simpleBody(t, "stored elsewhere"), FirstDelivery: true,
				Stored: func(context.Context) (*contracts.LLMResult, error) { return kept, nil }}
			first := c.Call(context.Background(), in)
			if first.Error != nil || first.Cached {
				t.Fatalf("first %+v", first)
			}
			res, started, _, err := recs.Lookup(context.Background(), "c.turn-s")
			if err != nil || res != nil || started == nil || started.Call != 1 {
				t.Fatalf("store holds result %+v, record %+v (%v): want the call record alone", res, started, err)
			}
			// Not stored where Stored looks (a crash before the event): the
			// record makes the repeat say so.
			in.FirstDelivery = false
			if again := c.Call(context.Background(), in); again.Cached || srv.Requests() != 2 || len(again.Warnings) == 0 {
				t.Fatalf("repeat %+v, %d requests", again, srv.Requests())
			}
			kept = &first
			for _, fd := range []bool{false, true} { // a redelivery, and a first delivery finding the key taken
				in.FirstDelivery = fd
				got := c.Call(context.Background(), in)
				if !got.Cached || got.Body != first.Body || srv.Requests() != 2 {
					t.Fatalf("first delivery %v: %+v, %d requests", fd, got, srv.Requests())
				}
			}
		})
	}
}
