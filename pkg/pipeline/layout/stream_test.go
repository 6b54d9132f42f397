package layout_test

import (
	"context"
	"testing"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestEnsureStreamUpdatesOnlyOnChange: an unchanged stream is left alone, a
// changed setting is applied.
func TestEnsureStreamUpdatesOnlyOnChange(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	for _, work := range []int64{1 << 20, 1 << 20, 2 << 20} {
		s, err := layout.EnsureStream(ctx, js, layout.StreamConfig{WorkMaxBytes: work, HistoryMaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxBytes != work+1<<20 {
			t.Fatalf("max bytes %v, want %v", info.Config.MaxBytes, work+1<<20)
		}
	}
}
