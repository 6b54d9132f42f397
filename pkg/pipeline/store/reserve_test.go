package store_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// TestReserveAcrossReplicas: two admission points (two processes' handles
// on the bucket) race 64 calls of a $0.0012 worst case for one principal's
// $0.01 day and $0.05 month on the same records: exactly 8 are admitted,
// whatever the interleaving, and the holds are what they admitted.
func TestReserveAcrossReplicas(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	var replicas []*store.Usage
	for range 2 {
		u, err := store.OpenUsage(ctx, js, 1)
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, u)
	}
	budgets := []contracts.Budget{{USD: 0.01, Period: "day"}, {USD: 0.05, Period: "month"}}
	price := &contracts.Price{Input: 20, Output: 20}
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "c1.t" + strconv.Itoa(i)
			r, err := replicas[i%2].Reserve(ctx, "key:a", budgets, id, spend.Estimate(id, 40, 20, price))
			switch {
			case err != nil:
				t.Error(err)
			case r == nil:
				admitted.Add(1)
			case r.Budget != budgets[0]:
				t.Errorf("refused by %v", r.Budget)
			default:
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 8 || refused.Load() != 56 {
		t.Fatalf("admitted %d, refused %d: want 8 and 56", admitted.Load(), refused.Load())
	}
	for _, w := range []string{spend.DayWindow(time.Now()), spend.MonthWindow(time.Now())} {
		tot, err := replicas[0].Totals(ctx, "key:a", w)
		if err != nil {
			t.Fatal(err)
		}
		if nanos, _ := tot.Held(time.Now()); nanos != 8*1_200_000 || len(tot.Holds) != 8 {
			t.Fatalf("%s holds %d nanos in %d holds", w, nanos, len(tot.Holds))
		}
	}
	if r, _ := replicas[0].Check(ctx, "key:a", budgets); r != nil {
		t.Fatalf("the check refuses with $0.0004 left: %s", r.Message())
	}
}

// TestReserveSettleFoldRelease: a hold is settled to the call's real cost,
// the fold of the turn's usage turns it into spend in the same write (never
// both, never neither), and a release drops an unpaid call's hold.
func TestReserveSettleFoldRelease(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = u.Fold(ctx, slog.Default()) }()

	day := []contracts.Budget{{USD: 0.01, Period: "day"}}
	price := &contracts.Price{Input: 20, Output: 20}
	held := func() (int64, int64) {
		tot, err := u.Totals(ctx, "key:a", spend.DayWindow(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := tot.Held(time.Now())
		return n, tot.CostNanos
	}
	// Two rounds of one turn, a third call of another turn.
	for _, id := range []string{"c1.t1", "c1.t1.r1", "c1.t2"} {
		turn := id[:5]
		if r, err := u.Reserve(ctx, "key:a", day, id, spend.Estimate(turn, 100, 50, price)); r != nil || err != nil {
			t.Fatalf("reserve %s: %v %v", id, r, err)
		}
	}
	if n, _ := held(); n != 3*3_000_000 {
		t.Fatalf("held %d, want 3 × $0.003", n)
	}
	if r, _ := u.Reserve(ctx, "key:a", day, "c1.t3", spend.Estimate("c1.t3", 100, 50, price)); r == nil {
		t.Fatal("a fourth $0.003 admitted against $0.01 with $0.009 held")
	}
	// Settled: the first round cost 20 tokens, not 150.
	real := spend.Actual("c1.t1", contracts.LlmUsage{PromptTokens: 10, CompletionTokens: 10}, price)
	if err := u.Settle(ctx, "key:a", day, "c1.t1", real); err != nil {
		t.Fatal(err)
	}
	if n, _ := held(); n != 2*3_000_000+400_000 {
		t.Fatalf("held %d after the settle, want $0.0064", n)
	}
	// The third call failed before it was paid.
	if err := u.Release(ctx, "key:a", day, "c1.t2"); err != nil {
		t.Fatal(err)
	}
	if n, _ := held(); n != 3_000_000+400_000 {
		t.Fatalf("held %d after the release, want $0.0034", n)
	}
	// The turn completes: both rounds' holds become its real cost.
	if err := u.Record(ctx, spend.Record{Principal: "key:a", TurnKey: "c1.t1", At: time.Now().UTC(),
		Usage: contracts.LlmUsage{PromptTokens: 20, CompletionTokens: 20}, Cost: contracts.Cost{Total: 0.0008, Currency: "USD"}}); err != nil {
		t.Fatal(err)
	}
	waitFolded(t, u)
	if n, spent := held(); n != 0 || spent != 800_000 {
		t.Fatalf("after the fold: held %d, spent %d; want 0 and $0.0008", n, spent)
	}
	// The month record was never held (no month budget) yet is folded as before.
	if month, _ := u.Totals(ctx, "key:a", spend.MonthWindow(time.Now())); month.CostNanos != 800_000 || len(month.Holds) != 0 {
		t.Fatalf("month %+v", month)
	}
}

// TestReserveRedeliveredOnce: a call whose holder died (kill -9) is
// redelivered to another replica, which reserves under the same call key:
// the hold is renewed, not added again, and the call is not refused for
// its own hold.
func TestReserveRedeliveredOnce(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	a, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	budgets := []contracts.Budget{{Tokens: 100, Period: "day"}}
	h := spend.Estimate("c1.t1", 40, 50, nil)
	for i, u := range []*store.Usage{a, b} {
		if r, err := u.Reserve(ctx, "key:a", budgets, "c1.t1", h); r != nil || err != nil {
			t.Fatalf("delivery %d: %v %v", i+1, r, err)
		}
	}
	tot, err := b.Totals(ctx, "key:a", spend.DayWindow(time.Now()))
	if _, tokens := tot.Held(time.Now()); err != nil || tokens != 90 || len(tot.Holds) != 1 {
		t.Fatalf("held %d tokens in %d holds after a redelivery, want 90 in 1 (%v)", tokens, len(tot.Holds), err)
	}
}
