package store_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

func usageRec(p, turn string, usd float64) spend.Record {
	return spend.Record{Principal: p, TurnKey: "c1." + turn, Model: "m", At: time.Now().UTC(),
		Usage: contracts.LlmUsage{PromptTokens: 100, CompletionTokens: 10}, Cost: contracts.Cost{Total: usd, Currency: "USD"}}
}

// waitFolded waits until the folder has added every record.
func waitFolded(t *testing.T, u *store.Usage) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := u.Pending(context.Background())
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage not folded: %d pending (%v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUsageCountedOnce: the same completion recorded twice (a redelivery,
// or two mapper replicas) is counted once; two folders running at once
// (two mapper processes) count every turn once.
func TestUsageCountedOnce(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	u2, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, x := range []*store.Usage{u, u2} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = x.Fold(ctx, slog.Default()) }()
	}
	for i, turn := range []string{"t1", "t1", "t2", "t1", "t3", "t2"} {
		r := usageRec("key:a", turn, 0.001)
		if i%2 == 1 {
			r.Cost.Total = 99 // a redelivery never replaces what was counted
		}
		if err := u.Record(ctx, r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	// Another principal's turn with the same key is its own turn.
	if err := u2.Record(ctx, usageRec("key:b", "t1", 0.5)); err != nil {
		t.Fatal(err)
	}
	waitFolded(t, u)
	rep, err := u.Report(ctx, spend.Filter{Principal: "key:a"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Turns != 3 || rep.InputTokens != 300 || rep.Cost.Total != 0.003 {
		t.Fatalf("key:a report %+v, want 3 turns, 300 input tokens, $0.003", rep.Counts)
	}
	all, err := u.Report(ctx, spend.Filter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if all.Turns != 4 || all.Cost.Total != 0.503 || len(all.ByPrincipal) != 2 {
		t.Fatalf("all report %+v", all)
	}
	month, err := u.Totals(ctx, "key:a", spend.MonthWindow(time.Now()))
	if err != nil || month.Turns != 3 {
		t.Fatalf("month totals %+v %v", month, err)
	}
	refusal, err := u.Check(ctx, "key:a", []contracts.Budget{{USD: 0.003, Period: "day"}})
	if err != nil || refusal == nil {
		t.Fatalf("a spent budget was not refused: %+v %v", refusal, err)
	}
	if refusal, _ := u.Check(ctx, "key:a", []contracts.Budget{{USD: 0.0031, Period: "day"}}); refusal != nil {
		t.Fatalf("refused under budget: %+v", refusal)
	}
	cancel()
	wg.Wait()
}

// TestUsageTwoFoldersKeepNoStaleTotals: each folder keeps the totals it
// last wrote, so when two take turns on one principal each finds the
// other's write only through its compare-and-set; 300 turns are still
// counted exactly once each.
func TestUsageTwoFoldersKeepNoStaleTotals(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var folders []*store.Usage
	for range 2 {
		u, err := store.OpenUsage(ctx, js, 1)
		if err != nil {
			t.Fatal(err)
		}
		folders = append(folders, u)
	}
	var wg sync.WaitGroup
	for _, u := range folders {
		wg.Add(1)
		go func() { defer wg.Done(); _ = u.Fold(ctx, slog.Default()) }()
	}
	const n = 300
	for i := range n {
		if err := folders[i%2].Record(ctx, usageRec("key:a", "t"+strconv.Itoa(i), 0.001)); err != nil {
			t.Fatal(err)
		}
	}
	waitFolded(t, folders[0])
	for _, w := range []string{spend.DayWindow(time.Now()), spend.MonthWindow(time.Now())} {
		tot, err := folders[1].Totals(ctx, "key:a", w)
		if err != nil || tot.Turns != n || tot.InputTokens != 100*n {
			t.Fatalf("%s totals %+v (%v), want %d turns", w, tot.Counts, err, n)
		}
	}
	cancel()
	wg.Wait()
}

// TestPendingRightAfterRecord: a record is pending the moment Record
// returns, before the server has told the folder's consumer of it (it does
// so from a queue), so waiting for Pending to reach 0 never returns early.
func TestPendingRightAfterRecord(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	u, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := u.Record(ctx, usageRec("key:a", "t"+strconv.Itoa(i), 0.001)); err != nil {
			t.Fatal(err)
		}
		if n, err := u.Pending(ctx); err != nil || n != uint64(i+1) {
			t.Fatalf("after record %d: %d pending (%v), want %d", i+1, n, err, i+1)
		}
	}
}
