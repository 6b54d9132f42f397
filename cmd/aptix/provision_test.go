package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aptix-dev/aptix/pkg/pipeline"
)

// TestDeployDefinitionsInStep: the stream and consumer files in deploy/nats
// are what `aptix provision --write-definitions` produces from the code the
// stages run; regenerate them with `make definitions` when this fails.
func TestDeployDefinitionsInStep(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		dir := t.TempDir()
		if err := writeDefinitions(dir, pipeline.StreamConfig{Replicas: replicas}, pipeline.SubscriberConfig{}); err != nil {
			t.Fatal(err)
		}
		committed := filepath.Join("..", "..", "deploy", "nats", "jetstream", map[int]string{1: "r1", 3: "r3"}[replicas])
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 7 { // two streams, five stage consumers
			t.Fatalf("%d definition files, want 7", len(entries))
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
