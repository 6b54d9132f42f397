package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestDeployDefinitionsInStep: the stream and consumer files in deploy/nats
// are what `aptix provision --write-definitions` produces from the code the
// stages run; regenerate them with `make definitions` when this fails.
func TestDeployDefinitionsInStep(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		dir := t.TempDir()
		if err := writeDefinitions(dir, layout.StreamConfig{Replicas: replicas}, pipeline.SubscriberConfig{}); err != nil {
			t.Fatal(err)
		}
		committed := filepath.Join("..", "..", "deploy", "nats", "jetstream", map[int]string{1: "r1", 3: "r3"}[replicas])
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 9 { // three streams, five stage consumers and the usage folder
			t.Fatalf("%d definition files, want 9", len(entries))
		}
		for _, e := range entries {
			want, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			got, err := os.ReadFile(filepath.Join(committed, e.Name()))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s/%s is missing or stale (err %v): run make definitions", committed, e.Name(), err)
			}
		}
	}
}

// TestProvisionDedupWindow: `aptix provision` creates the streams with the
// de-duplication window APTIX_DEDUP_WINDOW sets (10 minutes without it),
// and refuses one JetStream would not accept.
func TestProvisionDedupWindow(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"", 10 * time.Minute}, {"90s", 90 * time.Second}, {"1d", 24 * time.Hour}} {
		t.Setenv(layout.EnvDedupWindow, c.env)
		out, err := run(t, "provision", "--dry-run")
		if err != nil {
			t.Fatal(err)
		}
		var plan struct {
			Stream, Queue struct {
				Duplicates time.Duration `json:"duplicate_window"`
			}
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		if plan.Stream.Duplicates != c.want || plan.Queue.Duplicates != c.want {
			t.Fatalf("%s=%q: windows %v and %v, want %v", layout.EnvDedupWindow, c.env, plan.Stream.Duplicates, plan.Queue.Duplicates, c.want)
		}
	}
	for _, bad := range []string{"10ms", "soon"} {
		t.Setenv(layout.EnvDedupWindow, bad)
		if _, err := run(t, "provision", "--dry-run"); err == nil || !strings.Contains(err.Error(), layout.EnvDedupWindow) {
			t.Fatalf("%s=%q: %v", layout.EnvDedupWindow, bad, err)
		}
	}
}

// TestProvisionPrintsWhatItMade: the consumers `aptix provision` names are
// the ones on the server afterwards (the stages' from the declared topology
// and the usage fold's), and so are the ones --dry-run plans.
func TestProvisionPrintsWhatItMade(t *testing.T) {
	_, url := natstest.Start(t)
	oldURL, oldData := natsURL, dataDir
	natsURL, dataDir = url, t.TempDir()
	defer func() { natsURL, dataDir = oldURL, oldData }()
	out, err := run(t, "provision", "--dry-run=false") // cobra keeps a flag an earlier test set
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(out, "consumers ")
	list, _, ok2 := strings.Cut(list, ";")
	if !ok || !ok2 {
		t.Fatalf("no consumers in %q", out)
	}
	printed := strings.Split(list, ", ")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	var made []string
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for c := range s.ConsumerNames(ctx).Name() {
			made = append(made, c)
		}
	}
	slices.Sort(printed)
	slices.Sort(made)
	if !slices.Equal(printed, made) {
		t.Fatalf("printed consumers %v, on the server %v", printed, made)
	}
	dry, err := run(t, "provision", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct{ Consumers map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(dry), &plan); err != nil {
		t.Fatal(err)
	}
	planned := slices.Sorted(maps.Keys(plan.Consumers))
	if !slices.Equal(planned, made) {
		t.Fatalf("--dry-run plans consumers %v, provision made %v", planned, made)
	}
}
