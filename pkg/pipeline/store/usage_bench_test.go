package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// BenchmarkUsageFold measures how many turn records one folder adds to the
// totals per second (one in flight, two CAS writes each), on an embedded
// single-node server.
func BenchmarkUsageFold(b *testing.B) {
	_, js := natstest.JetStream(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := store.OpenUsage(ctx, js, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := u.Record(ctx, usageRec(fmt.Sprintf("key:p%d", i%10), fmt.Sprintf("t%d", i), 0.001)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	go func() { _ = u.Fold(ctx, slog.Default()) }()
	for {
		if n, err := u.Pending(ctx); err == nil && n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}
