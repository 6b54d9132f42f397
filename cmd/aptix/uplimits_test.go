package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestUpAppliesStreamLimits: `aptix up` sizes its streams from the same
// variables as `aptix provision` and the stage binaries, and says so in its
// banner (it kept the 256 MiB / 3 GiB defaults whatever they said).
func TestUpAppliesStreamLimits(t *testing.T) {
	t.Setenv("APTIX_QUEUE_MAX_BYTES", "1MiB")
	t.Setenv("APTIX_WORK_MAX_BYTES", "2MiB")
	t.Setenv("APTIX_HISTORY_MAX_BYTES", "3MiB")
	out := startUp(t)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{contracts.QueueStreamName: 1 << 20, contracts.StreamName: 5 << 20} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.MaxBytes; got != want {
			t.Errorf("%s max bytes %d, want %d", name, got, want)
		}
	}
	if !strings.Contains(out.String(), "Limits: queue 1.0 MiB, work 2.0 MiB, history 3.0 MiB") {
		t.Errorf("the banner does not state the limits:\n%s", out)
	}
}

// TestUpRefusesBadLimit: a malformed limit is a usage error before anything
// starts.
func TestUpRefusesBadLimit(t *testing.T) {
	t.Setenv("APTIX_WORK_MAX_BYTES", "lots")
	old := dataDir
	dataDir = t.TempDir()
	defer func() { dataDir = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := runUp(ctx, freeAddr(t), &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "APTIX_WORK_MAX_BYTES") {
		t.Fatalf("want an APTIX_WORK_MAX_BYTES error, got %v", err)
	}
}
