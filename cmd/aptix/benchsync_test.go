package main

import (
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/bench"
	"github.com/aptix-dev/aptix/cmd/aptix/internal/fsync"
)

// The bench's default run must store the way `aptix up` stores: a figure
// measured under another fsync policy is not what a user gets.
func TestBenchMeasuresShippedSync(t *testing.T) {
	t.Setenv(fsync.Env, "")
	shipped, err := fsync.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	up, err := startEmbedded(t.TempDir(), -1, "", nil, shipped)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Shutdown()
	b, err := bench.StartServer(t.TempDir(), fsync.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	u, g := up.JetStreamConfig(), b.JetStreamConfig()
	if u.SyncAlways != g.SyncAlways || u.SyncInterval != g.SyncInterval {
		t.Fatalf("aptix up stores with SyncAlways=%v SyncInterval=%s, the bench's default with SyncAlways=%v SyncInterval=%s",
			u.SyncAlways, u.SyncInterval, g.SyncAlways, g.SyncInterval)
	}
	if want := "as `aptix up` ships"; !strings.Contains(bench.StorageLabel(fsync.Policy{}), want) {
		t.Fatalf("label %q does not say %q", bench.StorageLabel(fsync.Policy{}), want)
	}
}
