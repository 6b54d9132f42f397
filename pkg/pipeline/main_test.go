package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	shutdown, err := SetupTelemetry(context.Background(), "pipeline-test")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = shutdown(context.Background())
	os.Exit(code)
}

func TestRetryStartupUntilReady(t *testing.T) {
	calls := 0
	err := retryStartup(context.Background(), slog.New(slog.DiscardHandler), "build", func() error {
		calls++
		if calls < 3 {
			return errors.New("jetstream not ready")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want success on the third", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retryStartup(ctx, slog.New(slog.DiscardHandler), "build", func() error { return errors.New("down") }); err == nil {
		t.Fatal("a cancelled start reported success")
	}
}
