package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// priced gives the sandbox profile a price: USD per million tokens.
func priced(perMillion float64) func(*Config) {
	return func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.Prices = profiles.Prices{"*": {Input: perMillion, Output: perMillion}}
		c.Profiles.Put(p)
	}
}

// usageOf opens the accounting and waits until every completed turn is folded.
func (e *env) usageOf() *store.Usage {
	e.t.Helper()
	u, err := store.OpenUsage(context.Background(), e.js, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := u.Pending(context.Background())
		if err == nil && n == 0 {
			return u
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("usage not folded: %d pending (%v)", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spentBy sums the cost and count of a principal's completed turns as the
// completed events tell them: what the accounting must agree with.
func (e *env) spentBy(principal string) (turns int, nanos int64) {
	e.t.Helper()
	c, err := e.js.OrderedConsumer(context.Background(), contracts.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"aptix.completed.>"}})
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		m, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return turns, nanos
		}
		var t contracts.Turn
		if json.Unmarshal(m.Data(), &t) != nil || t.Request.Principal != principal || t.Response == nil || t.Response.Cost == nil {
			continue
		}
		turns++
		nanos += t.Response.Cost.Nanos()
	}
}

func keyWithBudget(t *testing.T, e *env, name string, budgets ...contracts.Budget) (*auth.Keys, string) {
	t.Helper()
	keys, err := auth.OpenKeys(context.Background(), e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keys.CreateKey(context.Background(), auth.KeyRecord{Name: name, Budgets: budgets}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return keys, key
}

// TestBudgetAcrossGateways is the acceptance: a key with a $0.01/day
// budget against a priced sandbox, its turns spread over two gateway
// replicas, is refused once the next turn's worst case no longer fits in
// what is left of the cent, by either replica, before any model call; it
// never spends more than the cent; its usage (GET /v1/aptix/usage, and the
// totals aptix usage prints) equals the sum of its turns' costs.
func TestBudgetAcrossGateways(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, priced(20)) // $0.00002 per token
	keys, key := keyWithBudget(t, e, "capped", contracts.Budget{USD: 0.01, Period: contracts.PeriodDay})
	chain := &auth.Chain{Keys: keys}
	var logs logBuf
	urls := []string{e.authGateway(chain, &logs), e.authGateway(chain, &logs)}
	ctx := ctxT(t)
	ok, refusedAt := 0, -1
	for i := 0; i < 40 && refusedAt < 0; i++ {
		e.usageOf() // the last turn's spend is in the totals (the fold is a moment behind a completion)
		client := as(urls[i%2], key)
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("turn %d: spend a little of the budget", i))}})
		if err == nil {
			ok++
			continue
		}
		ae := apiError(t, err, 429, "budget_exceeded")
		if !strings.Contains(ae.Message, "resets at") || ae.Type != "insufficient_quota" {
			t.Fatalf("refusal %q (type %s) does not say when the budget resets", ae.Message, ae.Type)
		}
		refusedAt = i
	}
	if refusedAt < 2 || ok != refusedAt {
		t.Fatalf("refused at turn %d after %d turns: a $0.01 budget should allow several sandbox turns at $20/M", refusedAt, ok)
	}
	calls := e.sb.Requests()
	for i, url := range urls {
		status, h, body := call(t, "POST", url+"/v1/responses", `{"model":"sandbox-1","input":"more"}`, bearer(key))
		if status != 429 || !strings.Contains(body, `"code":"budget_exceeded"`) || h.Get("Retry-After") == "" {
			t.Fatalf("replica %d after the refusal: %d %s (Retry-After %q)", i, status, body, h.Get("Retry-After"))
		}
		status, _, body = call(t, "POST", url+"/v1/aptix/execute", `{"conversationId":"c","instruction":"more"}`, bearer(key))
		if status != 429 || !strings.Contains(body, `"code":"budget_exceeded"`) {
			t.Fatalf("execute on replica %d after the refusal: %d %s", i, status, body)
		}
	}
	if got := e.sb.Requests(); got != calls {
		t.Fatalf("the model was called %d times after the refusal", got-calls)
	}

	u := e.usageOf()
	turns, nanos := e.spentBy("key:capped")
	if turns != ok || nanos > 10_000_000 || nanos < 3_000_000 {
		t.Fatalf("completed events: %d turns, %d n$; want %d turns and at most a cent (most of it)", turns, nanos, ok)
	}
	rep, err := u.Report(ctx, spend.Filter{Principal: "key:capped"})
	if err != nil || rep.Turns != int64(turns) || rep.CostNanos != nanos {
		t.Fatalf("totals %+v (%v), want %d turns, %d n$", rep.Counts, err, turns, nanos)
	}
	status, _, body := call(t, "GET", urls[1]+"/v1/aptix/usage", "", bearer(key))
	var got struct {
		Cost struct {
			Total    float64
			Currency string
		}
		Turns       int64                   `json:"turns"`
		InputTokens int64                   `json:"input_tokens"`
		ByModel     map[string]spend.Counts `json:"by_model"`
		ByKey       map[string]spend.Counts `json:"by_key"`
	}
	if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil {
		t.Fatalf("GET /v1/aptix/usage: %d %s", status, body)
	}
	if got.Turns != int64(turns) || got.Cost.Total != contracts.CostFromNanos(nanos).Total || got.Cost.Currency != "USD" ||
		got.InputTokens != rep.InputTokens || got.ByModel["sandbox-1"].Turns != int64(turns) ||
		len(got.ByKey) != 1 || got.ByKey[key[len("sk-aptix-"):len("sk-aptix-")+16]].Turns != int64(turns) {
		t.Fatalf("GET /v1/aptix/usage %s disagrees with the turns (%d, %d n$)", body, turns, nanos)
	}
	t.Logf("refused after %d turns at $%.6f spent; %d model calls, none after the refusal", ok, contracts.CostFromNanos(nanos).Total, calls)
}

// TestBudgetBurstHardLimit is a burst against a budget: a key with a small budget
// sends 32 concurrent requests of large input (about 6,000 tokens each,
// $0.12 at $20 per million) at a priced sandbox. Each call holds its worst
// case before the model is called, so the burst spends at most the budget,
// what is refused gets 429 budget_exceeded, the totals equal the completed
// turns, and nothing is left held once the turns are counted. Before the
// reservation all 32 ran (about $6 of a $0.50 budget).
func TestBudgetBurstHardLimit(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 200 * time.Millisecond}, priced(20))
	const budget = 0.5
	keys, key := keyWithBudget(t, e, "burst", contracts.Budget{USD: budget, Period: contracts.PeriodDay})
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	client := as(url, key)
	ctx := ctxT(t)
	large := strings.Repeat("budget burst filler text ", 1500) // about 6,000 tokens
	const burst = 32
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("burst turn %d: %s", i, large))}})
			var ae *openai.Error
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &ae) && ae.StatusCode == 429 && ae.Code == "budget_exceeded":
				refused.Add(1)
			default:
				t.Errorf("turn %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	e.settled()
	u := e.usageOf()
	turns, nanos := e.spentBy("key:burst")
	rep, err := u.Report(ctx, spend.Filter{Principal: "key:burst"})
	if err != nil || rep.Turns != int64(ok.Load()) || int(rep.Turns) != turns || rep.CostNanos != nanos {
		t.Fatalf("totals %+v (%v); completed %d turns %d n$; %d answered", rep.Counts, err, turns, nanos, ok.Load())
	}
	if ok.Load() < 1 || refused.Load() < 1 || ok.Load()+refused.Load() != burst {
		t.Fatalf("%d ok, %d refused of %d", ok.Load(), refused.Load(), burst)
	}
	if nanos > int64(budget*1e9) {
		t.Fatalf("the burst spent $%.6f of a $%v budget: %d turns ran", contracts.CostFromNanos(nanos).Total, budget, ok.Load())
	}
	day, err := u.Totals(ctx, "key:burst", spend.DayWindow(time.Now()))
	if held, _ := day.Held(time.Now()); err != nil || held != 0 {
		t.Fatalf("$%v still held after every turn was counted (%v)", contracts.CostFromNanos(held).Total, err)
	}
	t.Logf("burst of %d: %d ran, %d refused, spent $%.6f of a $%v budget", burst, ok.Load(), refused.Load(), contracts.CostFromNanos(nanos).Total, budget)
}

// TestBusBurstHardLimit: the same burst on the bus path (turns a bus
// client submits with its principal and budgets, no gateway in between),
// over two LLM caller replicas: each call reserves against the shared
// totals record, so the two together admit no more than the budget allows.
func TestBusBurstHardLimit(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 200 * time.Millisecond}, priced(20))
	second := e.cfg
	second.Only = []string{"llmcaller"}
	e.run(e.nc, second)
	const budget = 0.5
	budgets := []contracts.Budget{{USD: budget, Period: contracts.PeriodDay}}
	large := strings.Repeat("budget burst filler text ", 1500)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const burst = 16
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := contracts.AgentExecuteRequest{ConversationId: fmt.Sprintf("c%d", i), TurnId: "t1",
				Instruction: fmt.Sprintf("bus burst %d: %s", i, large), Principal: "bus:burst", Budgets: budgets}
			if err := client.Submit(ctx, e.js, req); err != nil {
				t.Error(err)
				return
			}
			turn, err := client.Await(ctx, e.js, req.ConversationId, req.TurnId)
			switch {
			case err != nil || turn.Response == nil:
				t.Errorf("turn %d: %v", i, err)
			case turn.Response.Kind != contracts.KindError:
				ok.Add(1)
			case turn.Response.ErrorCode == "budget_exceeded":
				refused.Add(1)
			default:
				t.Errorf("turn %d: %+v", i, turn.Response)
			}
		}()
	}
	wg.Wait()
	e.settled()
	turns, nanos := e.spentBy("bus:burst")
	if ok.Load() < 1 || refused.Load() < 1 || turns != int(ok.Load()) {
		t.Fatalf("%d ok, %d refused of %d; %d completed turns", ok.Load(), refused.Load(), burst, turns)
	}
	if nanos > int64(budget*1e9) {
		t.Fatalf("the bus burst spent $%.6f of a $%v budget: %d turns ran", contracts.CostFromNanos(nanos).Total, budget, ok.Load())
	}
	t.Logf("bus burst of %d over two LLM callers: %d ran, %d refused, spent $%.6f of $%v", burst, ok.Load(), refused.Load(), contracts.CostFromNanos(nanos).Total, budget)
}

// TestBudgetContinuationHoldsHistory: a turn that continues a conversation
// sends only its new input, but the backend charges the history it holds
// too (the sandbox counts the whole previous_response_id chain). The
// reservation counts that history (what the conversation's last turn
// counted), so short follow-ups of a long first turn stop before the
// budget is overrun; counting the body alone admitted them until the
// spend was past it.
func TestBudgetContinuationHoldsHistory(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, priced(20))
	const budget = 0.5
	budgets := []contracts.Budget{{USD: budget, Period: contracts.PeriodDay}}
	large := strings.Repeat("budget history filler text ", 1400) // about 9,500 sandbox tokens, $0.19
	ran, refusedAt := 0, -1
	for i := 1; i <= 6 && refusedAt < 0; i++ {
		instruction := "and one more thing?"
		if i == 1 {
			instruction = large
		}
		turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "hist", TurnId: fmt.Sprintf("t%d", i),
			Instruction: instruction, Principal: "bus:hist", Budgets: budgets})
		e.settled()
		e.usageOf()
		switch {
		case turn.Response.Kind != contracts.KindError:
			ran++
		case turn.Response.ErrorCode == "budget_exceeded":
			refusedAt = i
		default:
			t.Fatalf("turn %d: %+v", i, turn.Response)
		}
	}
	turns, nanos := e.spentBy("bus:hist")
	if ran < 2 || refusedAt < 0 || turns != ran {
		t.Fatalf("%d turns ran, refused at %d, %d completed: want a continuation to run and a later one refused", ran, refusedAt, turns)
	}
	if nanos > int64(budget*1e9) {
		t.Fatalf("continuations spent $%.6f of a $%v budget", contracts.CostFromNanos(nanos).Total, budget)
	}
	t.Logf("%d turns ran, refused at turn %d, spent $%.6f of $%v", ran, refusedAt, contracts.CostFromNanos(nanos).Total, budget)
}

// TestUsageOnceUnderRedelivery: a mapper that records a turn's usage and
// then dies before acknowledging the turn gets it again; the completion is
// stored once (the mapper stores it before its records, so the client may
// read it before the redelivery: the test waits for the pipeline to
// settle), and the turn is counted once.
func TestUsageOnceUnderRedelivery(t *testing.T) {
	var crashes atomic.Int32
	e := newEnv(t, sandbox.Options{}, priced(100), func(c *Config) {
		c.BeforePublish = map[string]func(*contracts.Turn) error{"mapper": func(*contracts.Turn) error {
			if crashes.Add(1) == 1 {
				return errors.New("crashed after recording usage")
			}
			return nil
		}}
	})
	turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "count me once", Principal: "bus:tester"})
	e.settled()
	if crashes.Load() < 2 {
		t.Fatalf("the mapper ran %d times: no redelivery to test", crashes.Load())
	}
	if turn.Response.Cost == nil || turn.Response.Cost.Unpriced || turn.Response.Cost.Total <= 0 || turn.Response.Cost.Currency != "USD" {
		t.Fatalf("cost %+v", turn.Response.Cost)
	}
	rep, err := e.usageOf().Report(context.Background(), spend.Filter{Principal: "bus:tester"})
	if err != nil || rep.Turns != 1 || rep.CostNanos != turn.Response.Cost.Nanos() {
		t.Fatalf("totals %+v (%v), want 1 turn at %v", rep.Counts, err, turn.Response.Cost.Total)
	}
}

// TestBusTurnBudget: a bus turn whose worst case no longer fits its token
// budget ends with a budget_exceeded error result and the model is not
// called. 300 tokens admit the first turn (about 20 input tokens and the
// sandbox's 256 output held), then hold the second's worst case on top of
// what the first cost: refused.
func TestBusTurnBudget(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, priced(100))
	budget := []contracts.Budget{{Tokens: 300, Period: contracts.PeriodMonth}}
	first := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "spend", Principal: "bus:b", Budgets: budget})
	if first.Response.Kind == contracts.KindError {
		t.Fatalf("the first turn (nothing spent yet) failed: %+v", first.Response)
	}
	// The mapper records the turn's usage after its answer: wait for that
	// record before waiting for it to be folded (failed 2 runs in 20).
	e.settled()
	e.usageOf()
	calls := e.sb.Requests()
	second := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t2", Instruction: "spend more", Principal: "bus:b", Budgets: budget})
	if second.Response.Kind != contracts.KindError || second.Response.ErrorCode != "budget_exceeded" || !strings.Contains(second.Response.ErrorMessage, "resets at") {
		t.Fatalf("second turn: %+v", second.Response)
	}
	if e.sb.Requests() != calls {
		t.Fatal("the model was called for a refused turn")
	}
}

// TestUnpricedTurn: a model without a price says so instead of costing 0.
func TestUnpricedTurn(t *testing.T) {
	e := newEnv(t, sandbox.Options{}) // the test profile has no prices
	turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "free?"})
	if turn.Response.Cost == nil || !turn.Response.Cost.Unpriced {
		t.Fatalf("cost %+v", turn.Response.Cost)
	}
	b, _ := json.Marshal(turn.Response)
	if !strings.Contains(string(b), `"cost":{"unpriced":true}`) {
		t.Fatalf("response JSON %s", b)
	}
	// The mapper records usage after the completion the turn returned on:
	// wait for that record to be folded before reading the totals.
	var rep spend.Report
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rep, _ = e.usageOf().Report(context.Background(), spend.Filter{Principal: ""})
		if rep.Turns > 0 || time.Now().After(deadline) {
			break
		}
	}
	if rep.Turns != 1 || rep.Unpriced != 1 || rep.CostNanos != 0 {
		t.Fatalf("totals %+v", rep.Counts)
	}
}

// TestBudgetSpentWhileCallPaid: an LLM caller that paid for a call and died
// before publishing it gets the turn again after the budget was spent
// meanwhile (by the same principal on another replica). The redelivery
// does not refuse what was already paid:
// the turn completes, its cost is recorded as overrun, and the model is not
// called again; the next turn is refused; the call's hold is counted once
// (as the turn's cost) and none is left.
func TestBudgetSpentWhileCallPaid(t *testing.T) {
	var e *env
	var crashed atomic.Bool
	e = newEnv(t, sandbox.Options{}, priced(100), func(c *Config) {
		c.BeforePublish = map[string]func(*contracts.Turn) error{"llmcaller": func(turn *contracts.Turn) error {
			if turn.TurnId != "t2" || crashed.Swap(true) {
				return nil
			}
			// Another replica spends the rest of the budget while this call runs.
			u, err := store.OpenUsage(context.Background(), e.js, 1)
			if err != nil {
				return err
			}
			if err := u.Record(context.Background(), spend.Record{Principal: "bus:p", TurnKey: "elsewhere.x1", Model: "sandbox-1",
				At: time.Now().UTC(), Cost: contracts.Cost{Total: 1, Currency: "USD"}}); err != nil {
				return err
			}
			e.usageOf()
			return errors.New("crashed after the call was paid")
		}}
	})
	budget := []contracts.Budget{{USD: 0.5, Period: contracts.PeriodDay}}
	calls := e.sb.Requests()
	got := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t2", Instruction: "paid once", Principal: "bus:p", Budgets: budget})
	// The responded event is stored before the crash point, so the turn
	// can complete before the crash and its redelivery: wait for both.
	e.settled()
	if !crashed.Load() || got.Response.Kind == contracts.KindError {
		t.Fatalf("crashed %v, response %+v", crashed.Load(), got.Response)
	}
	if n := e.sb.Requests() - calls; n != 1 {
		t.Fatalf("%d model calls for one turn redelivered after its call", n)
	}
	rep, err := e.usageOf().Report(context.Background(), spend.Filter{Principal: "bus:p"})
	if err != nil || rep.Turns != 2 || rep.CostNanos != 1e9+got.Response.Cost.Nanos() {
		t.Fatalf("totals %+v (%v): want the other spend and this turn's overrun", rep.Counts, err)
	}
	next := e.turn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t3", Instruction: "refused", Principal: "bus:p", Budgets: budget})
	if next.Response.ErrorCode != "budget_exceeded" || e.sb.Requests()-calls != 1 {
		t.Fatalf("next turn %+v, %d calls", next.Response, e.sb.Requests()-calls)
	}
	// The crashed delivery's hold was counted once, as the turn's cost:
	// nothing is left held after the fold.
	day, err := e.usageOf().Totals(context.Background(), "bus:p", spend.DayWindow(time.Now()))
	if held, _ := day.Held(time.Now()); err != nil || held != 0 || len(day.Holds) != 0 {
		t.Fatalf("holds left after a crash and its redelivery: %+v (%v)", day.Holds, err)
	}
}
