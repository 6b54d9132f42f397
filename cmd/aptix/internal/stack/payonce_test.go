package stack

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// pastDedup redelivers a failed event after the stream's de-duplication
// window: a second publish of the same output would be stored again.
func pastDedup(c *Config) {
	c.Stream = layout.StreamConfig{Duplicates: 100 * time.Millisecond}
	c.Subscriber = pipeline.SubscriberConfig{AckWait: 5 * time.Second, MaxDeliver: 4,
		Backoff: []time.Duration{400 * time.Millisecond}, DrainTimeout: 3 * time.Second}
}

// crashOnce fails the LLM caller's handling of the event the turn is at
// when pick says so, once per round, after it stored its output: the
// event is redelivered past the de-duplication window. seen counts the
// handlings that reached the hook, by round.
type crashOnce struct {
	mu      sync.Mutex
	crashed map[int]bool
	seen    map[int]int
	// wait, if set, runs before a round's crash (a later round goes on meanwhile).
	wait func(round int)
}

func (c *crashOnce) hook(t *contracts.Turn) error {
	r := 0
	if t.Tools != nil {
		r = t.Tools.Round
	}
	c.mu.Lock()
	c.seen[r]++
	first := !c.crashed[r]
	c.crashed[r] = true
	c.mu.Unlock()
	if !first {
		return nil
	}
	if c.wait != nil {
		c.wait(r)
	}
	return errors.New("crashed after the output was stored")
}

func (c *crashOnce) handled(round int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[round]
}

func newCrashOnce() *crashOnce { return &crashOnce{crashed: map[int]bool{}, seen: map[int]int{}} }

// untilHandled waits for n handlings of the round to reach the hook.
func (c *crashOnce) untilHandled(t *testing.T, round, n int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); c.handled(round) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("round %d handled %d times, want %d", round, c.handled(round), n)
		}
	}
	time.Sleep(300 * time.Millisecond) // let a second output land before counting
}

// callRecord is the value aptix_llm_results holds under a call's key.
func callRecord(t *testing.T, e *env, key string) []byte {
	t.Helper()
	kv, err := e.js.KeyValue(context.Background(), caller.ResultsBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return entry.Value()
}

// TestRespondedEventIsTheResult: the LLM caller stores its responded event
// as the call's result, and aptix_llm_results keeps only the record
// written before the model was called. A handling that fails after the
// event is stored is redelivered past the de-duplication window: the
// redelivery finds the event, does not call the model, and stores no
// second one, so the turn completes once.
func TestRespondedEventIsTheResult(t *testing.T) {
	crash := newCrashOnce()
	e := newEnv(t, sandbox.Options{}, pastDedup, func(c *Config) {
		c.BeforePublish = map[string]func(*contracts.Turn) error{"llmcaller": crash.hook}
	})
	got := e.turn(contracts.AgentExecuteRequest{ConversationId: "c-po", TurnId: "t1", Instruction: "once", RagScope: contracts.RagScopeNone})
	if got.Response.Kind != contracts.KindOK || got.LLM == nil || got.LLM.Cached {
		t.Fatalf("%+v (llm %+v)", got.Response, got.LLM)
	}
	crash.untilHandled(t, 0, 2)
	if n := e.sb.Requests(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	for _, stage := range []string{contracts.StageResponded, contracts.StageCompleted} {
		if n := e.count(contracts.Subject(stage, "c-po", "t1")); n != 1 {
			t.Fatalf("%d %s events, want 1", n, stage)
		}
	}
	if v := callRecord(t, e, "c-po.t1"); !bytes.HasPrefix(v, []byte(`{"aptixCallStarted":`)) {
		t.Fatalf("aptix_llm_results holds %.120s: want the call record only, the result is the responded event", v)
	}
	e.settled()
}

// TestToolLoopRoundFindsItsOwnResult: in a server-side tool loop each LLM
// call's result is its round's event (toolround for round 0, responded for
// round 1). Both handlings fail after storing it and are redelivered past
// the de-duplication window; round 0's redelivery comes once round 1's
// responded event is stored, so the newest event of the turn is a later
// round's. Neither calls the model again nor stores its event twice, and
// the envelope's toolround event (asking for the tools, no result) is
// never taken for round 0's result.
func TestToolLoopRoundFindsItsOwnResult(t *testing.T) {
	crash := newCrashOnce()
	var e *env
	var conv, turn string
	var mu sync.Mutex
	crash.wait = func(round int) {
		if round != 0 {
			return
		}
		// Hold round 0's handling (unacknowledged) until the loop has
		// gone on to round 1's answer.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			c, tu := conv, turn
			mu.Unlock()
			if c != "" && e.count(contracts.Subject(contracts.StageResponded, c, tu)) > 0 {
				return
			}
		}
	}
	var srvCalls func(string) int
	{
		env, srv := toolEnv(t, pastDedup, func(c *Config) {
			c.BeforePublish = map[string]func(*contracts.Turn) error{"llmcaller": func(tn *contracts.Turn) error {
				mu.Lock()
				conv, turn = tn.ConversationId, tn.TurnId
				mu.Unlock()
				return crash.hook(tn)
			}}
		})
		e, srvCalls = env, srv.Calls
	}
	_, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), loopParams(`[call:add {"a":40,"b":2}]`, mcpTool("calc")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.OutputText(), `"42"`) {
		t.Fatalf("answer %q", r.OutputText())
	}
	crash.untilHandled(t, 0, 2)
	crash.untilHandled(t, 1, 2)
	if n := e.sb.Requests(); n != 2 || srvCalls("add") != 1 {
		t.Fatalf("%d model calls (want 2: one per round), add ran %d times", n, srvCalls("add"))
	}
	done := awaitTurn(t, e, r.ID)
	c, tu := done.ConversationId, done.TurnId
	// The envelope's toolround asking for the tools, and round 0's result.
	for stage, want := range map[string]uint64{contracts.StageToolRound: 2, contracts.StageResponded: 1, contracts.StageCompleted: 1} {
		if n := e.count(contracts.Subject(stage, c, tu)); n != want {
			t.Fatalf("%d %s events, want %d", n, stage, want)
		}
	}
	for _, key := range []string{c + "." + tu, c + "." + tu + ".r1"} {
		if v := callRecord(t, e, key); !bytes.HasPrefix(v, []byte(`{"aptixCallStarted":`)) {
			t.Fatalf("%s holds %.120s: want the call record only", key, v)
		}
	}
	e.settled()
}
