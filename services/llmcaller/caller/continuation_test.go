package caller_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

func historyStores(t *testing.T) map[string]func(t *testing.T) caller.HistoryStore {
	return map[string]func(t *testing.T) caller.HistoryStore{
		"memory": func(t *testing.T) caller.HistoryStore { return caller.NewMemHistoryStore() },
		"jetstream": func(t *testing.T) caller.HistoryStore {
			_, js := startJetStream(t)
			s, err := caller.NewKVHistoryStore(context.Background(), js)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := caller.NewKVHistoryStore(context.Background(), js); err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// TestStatelessContinuation drives three turns through a backend without
// previous_response_id and checks that the sandbox received the replayed
// items and answered exactly as it does when threaded by id.
func TestStatelessContinuation(t *testing.T) {
	for name, newStore := range historyStores(t) {
		t.Run(name, func(t *testing.T) {
			ts, srv := startSandbox(t, sandbox.Options{})
			set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.SupportsPreviousResponseID = false })
			set.Put(profiles.Profile{Name: "threaded", BaseURL: ts.URL + "/v1", Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true}})
			c := caller.New(set, caller.Options{Logger: quiet, History: newStore(t)})
			ctx := context.Background()

			turn1 := c.Call(ctx, caller.Input{TurnID: "t1", Body: requestBody(t, map[string]any{"input": []any{
				message("system", "You are the boot prompt."), message("user", "[MODE: DDR_CREATION]\n\n[INSTRUCTION]\nFirst question")}})})
			if turn1.Error != nil {
				t.Fatal(turn1.Error)
			}
			id1 := responseID(t, turn1.Body)

			body2 := func() []byte {
				return requestBody(t, map[string]any{"previous_response_id": id1, "input": []any{message("user", "[MODE: REVIEW]\n\n[INSTRUCTION]\nSecond question")}})
			}
			turn2 := c.Call(ctx, caller.Input{TurnID: "t2", Body: body2()})
			if turn2.Error != nil {
				t.Fatal(turn2.Error)
			}
			sent := string(srv.LastRequest())
			if strings.Contains(sent, "previous_response_id") || !strings.Contains(sent, "You are the boot prompt.") ||
				!strings.Contains(sent, "First question") || !strings.Contains(sent, outputText(t, turn1.Body)) {
				t.Fatalf("turn 2 body did not replay turn 1: %s", sent)
			}
			threaded := c.Call(ctx, caller.Input{Backend: "threaded", TurnID: "t2b", Body: body2()})
			if !strings.Contains(string(srv.LastRequest()), `"previous_response_id":"`+id1+`"`) {
				t.Fatalf("threaded profile must send previous_response_id: %s", srv.LastRequest())
			}
			want := "Sandbox reply (mode REVIEW) to: Second question. Context chunks: none. Continuing from " + id1 + "."
			if got := outputText(t, turn2.Body); got != want || outputText(t, threaded.Body) != want {
				t.Fatalf("stateless %q threaded %q want %q", got, outputText(t, threaded.Body), want)
			}

			// Turn 3 continues from turn 2: all earlier items, in order.
			id2 := responseID(t, turn2.Body)
			turn3 := c.Call(ctx, caller.Input{TurnID: "t3", Body: requestBody(t, map[string]any{"previous_response_id": id2, "input": "Third"})})
			if turn3.Error != nil {
				t.Fatal(turn3.Error)
			}
			var sent3 struct {
				Input []struct {
					Role string `json:"role"`
					Type string `json:"type"`
				} `json:"input"`
			}
			if err := json.Unmarshal(srv.LastRequest(), &sent3); err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, it := range sent3.Input {
				roles = append(roles, it.Role)
			}
			if got := strings.Join(roles, ","); got != "system,user,assistant,user,assistant,user" {
				t.Fatalf("turn 3 input roles %s", got)
			}
			if !strings.Contains(outputText(t, turn3.Body), "Continuing from "+id2) {
				t.Fatalf("turn 3 text %q", outputText(t, turn3.Body))
			}
		})
	}
}

func TestStatelessContinuationUnknownID(t *testing.T) {
	ts, srv := startSandbox(t, sandbox.Options{})
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.SupportsPreviousResponseID = false })
	c := caller.New(set, caller.Options{Logger: quiet, History: caller.NewMemHistoryStore()})
	res := c.Call(context.Background(), caller.Input{TurnID: "t", Body: requestBody(t, map[string]any{"previous_response_id": "resp_gone", "input": "hi"})})
	if res.Error == nil || res.Error.Type != "aptix_history_missing" || !strings.Contains(res.Error.Message, "conversation history is missing") ||
		!strings.Contains(res.Error.Message, "resp_gone") || srv.Requests() != 0 {
		t.Fatalf("result %+v error %+v requests %d", res, res.Error, srv.Requests())
	}
}

func TestHistoryStoreContract(t *testing.T) {
	for name, newStore := range historyStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			if _, err := s.Get(ctx, "resp_missing"); !errors.Is(err, caller.ErrHistoryNotFound) {
				t.Fatalf("missing: %v", err)
			}
			// Larger than a default 1 MB NATS payload: must still round-trip.
			big := json.RawMessage(`"` + strings.Repeat("x", 3<<20) + `"`)
			items := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"a"}`), big}
			if err := s.Put(ctx, "resp_big", items); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "resp_big")
			if err != nil || len(got) != 2 || string(got[0]) != string(items[0]) || len(got[1]) != len(big) {
				t.Fatalf("round trip: %v, %d items", err, len(got))
			}
		})
	}
}

func TestResultStoreContract(t *testing.T) {
	for name, newStore := range resultStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			if r, err := s.Get(ctx, "absent"); r != nil || err != nil {
				t.Fatalf("absent: %+v %v", r, err)
			}
			in := sampleResult()
			if err := s.Put(ctx, "t-1", in); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "t-1")
			if err != nil || got == nil || got.Body != in.Body || got.Error.Code != "c" || got.Attempts != 3 || got.Status != 429 {
				t.Fatalf("round trip %+v %v", got, err)
			}
		})
	}
}

// TestHistoryStoreWhereRecordsGo: a record that fits a value is one KV
// message (the object store stays empty), a large one or one whose id is no
// KV key goes to the object store, and a record kept in the object store
// before the KV bucket existed is still found.
func TestHistoryStoreWhereRecordsGo(t *testing.T) {
	ctx := context.Background()
	_, js := startJetStream(t)
	s, err := caller.NewKVHistoryStore(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	small := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"a"}`)}
	big := []json.RawMessage{json.RawMessage(`"` + strings.Repeat("x", 300<<10) + `"`)}
	for id, items := range map[string][]json.RawMessage{"resp_small": small, "resp_big": big, "resp/odd id": small} {
		if err := s.Put(ctx, id, items); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	obs, err := js.ObjectStore(ctx, caller.HistoryBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "resp_old"}, strings.NewReader(`[{"type":"message","role":"user","content":"old"}]`)); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, caller.HistoryKVBucket)
	if err != nil {
		t.Fatal(err)
	}
	inKV := map[string]bool{}
	for _, id := range []string{"resp_small", "resp_big", "resp_old"} {
		_, err := kv.Get(ctx, id)
		inKV[id] = err == nil
	}
	inObs := map[string]bool{}
	for _, id := range []string{"resp_small", "resp_big", "resp/odd id", "resp_old"} {
		_, err := obs.GetInfo(ctx, id)
		inObs[id] = err == nil
	}
	if !inKV["resp_small"] || inKV["resp_big"] || inObs["resp_small"] || !inObs["resp_big"] || !inObs["resp/odd id"] {
		t.Fatalf("in KV %v, in object store %v", inKV, inObs)
	}
	for id, n := range map[string]int{"resp_small": 1, "resp_big": 1, "resp/odd id": 1, "resp_old": 1} {
		got, err := s.Get(ctx, id)
		if err != nil || len(got) != n {
			t.Fatalf("get %s: %v, %d items", id, err, len(got))
		}
	}
	if string(mustGet(t, s, "resp_big")[0]) != string(big[0]) || !strings.Contains(string(mustGet(t, s, "resp_old")[0]), "old") {
		t.Fatal("records changed on the way")
	}
}

func mustGet(t *testing.T, s caller.HistoryStore, id string) []json.RawMessage {
	t.Helper()
	items, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return items
}
