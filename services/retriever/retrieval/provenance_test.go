package retrieval

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestIndexSyncedFromAnotherServerIsRebuilt: a local index is a cache of
// one chunk store. Opened against another server's store (another `aptix
// up` data dir), it is rebuilt, so a search never answers from files that
// store does not hold; reopened against the same store, it is kept.
func TestIndexSyncedFromAnotherServerIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	_, jsA := natstest.JetStream(t)
	_, jsB := natstest.JetStream(t)
	a, b := &env{t: t, js: jsA}, &env{t: t, js: jsB}
	rootA, rootB := t.TempDir(), t.TempDir()
	write(t, rootA, "old/stale.go", "package old\n\n// StaleHandler answers from the other server.\nfunc StaleHandler() {}\n")
	write(t, rootB, "new/fresh.go", "package fresh\n\n// FreshHandler answers from this server.\nfunc FreshHandler() {}\n")
	a.index(rootA, "ws", "app")
	b.index(rootB, "ws", "app")
	stale := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "stale handler"}
	fresh := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "fresh handler"}

	open := func(e *env) *Index {
		t.Helper()
		ix, err := Open(context.Background(), e.js, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	ix := open(a)
	if ix.Rebuilt() != "" {
		t.Errorf("a new index reports a rebuild: %s", ix.Rebuilt())
	}
	if got := find(t, ix, stale); len(got) == 0 || got[0].Path != "old/stale.go" {
		t.Fatalf("server A's file not found on A: %v", paths(got))
	}
	ix.Close()

	ix = open(b)
	if why := ix.Rebuilt(); !strings.Contains(why, "another chunk store") {
		t.Errorf("Rebuilt() = %q, want it to name another chunk store", why)
	}
	for _, h := range find(t, ix, stale) {
		if h.Path == "old/stale.go" {
			t.Errorf("index opened on server B answers with server A's file %s", h.Path)
		}
	}
	if got := find(t, ix, fresh); len(got) == 0 || got[0].Path != "new/fresh.go" {
		t.Errorf("server B's file not found on B: %v", paths(got))
	}
	ix.Close()

	ix = open(b)
	defer ix.Close()
	if why := ix.Rebuilt(); why != "" {
		t.Errorf("reopened on the same server, the index was rebuilt: %s", why)
	}
	if got := find(t, ix, fresh); len(got) == 0 || got[0].Path != "new/fresh.go" {
		t.Errorf("reopened index lost server B's file: %v", paths(got))
	}
}

// TestIndexWithoutMetadataIsRebuilt: bleve writes its metadata file without
// an fsync, so a power loss can leave the index directory without it (the
// power-cut test found `aptix up` refusing to start on such a data dir).
// The index is rebuilt from the chunk store instead.
func TestIndexWithoutMetadataIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	_, js := natstest.JetStream(t)
	e := &env{t: t, js: js}
	root := t.TempDir()
	write(t, root, "svc/handler.go", "package svc\n\n// PaymentHandler settles a payment.\nfunc PaymentHandler() {}\n")
	e.index(root, "ws", "app")
	ix, err := Open(context.Background(), js, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if err := os.Remove(filepath.Join(dir, "chunks.bleve", "index_meta.json")); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(context.Background(), js, Options{DataDir: dir})
	if err != nil {
		t.Fatalf("an index without its metadata stops the retriever: %v", err)
	}
	defer ix.Close()
	if why := ix.Rebuilt(); !strings.Contains(why, "damaged") {
		t.Errorf("Rebuilt() = %q, want it to say the index was damaged", why)
	}
	if got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "payment handler"}); len(got) == 0 || got[0].Path != "svc/handler.go" {
		t.Errorf("the rebuilt index does not find the file: %v", paths(got))
	}
}
