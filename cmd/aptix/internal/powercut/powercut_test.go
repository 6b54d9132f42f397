package powercut

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// mount mounts a fresh backing dir, or skips where FUSE cannot be mounted
// (not root, no /dev/fuse); under CI=true that fails instead.
func mount(t *testing.T) *FS {
	t.Helper()
	p, err := Mount(t.TempDir(), t.TempDir())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE mount needed (root and /dev/fuse): %v", err)
		}
		t.Skipf("no FUSE mount here: %v", err)
	}
	t.Cleanup(func() { _ = p.server.Unmount() })
	return p
}

func write(t *testing.T, f *os.File, off int64, s string) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func fsync(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCutKeepsOnlyWhatWasFsynced(t *testing.T) {
	p := mount(t)
	in := func(name string) string { return filepath.Join(p.Dir(), name) }
	out := func(name string) string { return filepath.Join(p.Backing(), name) }

	// Appended after the fsync: dropped.
	a, err := os.Create(in("a.blk"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, a, 0, "durable|")
	fsync(t, a)
	write(t, a, 8, "lost")
	if got := content(t, in("a.blk")); got != "durable|lost" {
		t.Fatalf("before the cut: %q", got)
	}

	// Overwritten inside the durable part, then truncated and grown:
	// the old bytes come back.
	b, err := os.Create(in("b.idx"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, b, 0, "0123456789")
	fsync(t, b)
	write(t, b, 2, "xx")
	if err := b.Truncate(4); err != nil {
		t.Fatal(err)
	}
	write(t, b, 6, "yyyyyy")

	// Never fsynced: gone. Renamed after its fsync: durable under its new name.
	c, err := os.Create(in("c.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, c, 0, "never synced")
	d, err := os.Create(in("d.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, d, 0, "synced")
	fsync(t, d)
	if err := os.Rename(in("d.tmp"), in("d.dat")); err != nil {
		t.Fatal(err)
	}

	// O_SYNC writes are durable when they return.
	e, err := os.OpenFile(in("e.dat"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	write(t, e, 0, "osync")

	for _, f := range []*os.File{a, b, c, d, e} {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := p.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if r.Removed != 1 || r.Restored != 2 || r.Dropped != 6 {
		t.Errorf("cut report: %s; want 1 removed, 2 restored (a.blk, b.idx), 6 bytes dropped", r)
	}
	for name, want := range map[string]string{"a.blk": "durable|", "b.idx": "0123456789", "d.dat": "synced", "e.dat": "osync"} {
		if got := content(t, out(name)); got != want {
			t.Errorf("%s after the cut: %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(out("c.tmp")); !os.IsNotExist(err) {
		t.Errorf("c.tmp, never fsynced, survived the cut: %v", err)
	}
}

// A file that was there before the mount is durable until written; a large
// write spanning pages restores byte for byte.
func TestCutRestoresPreexistingFile(t *testing.T) {
	backing := t.TempDir()
	old := bytes.Repeat([]byte("old-"), 64<<10)
	if err := os.WriteFile(filepath.Join(backing, "state"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, "untouched"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Mount(backing, t.TempDir())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE mount needed (root and /dev/fuse): %v", err)
		}
		t.Skipf("no FUSE mount here: %v", err)
	}
	t.Cleanup(func() { _ = p.server.Unmount() })
	f, err := os.OpenFile(filepath.Join(p.Dir(), "state"), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, 0, string(bytes.Repeat([]byte("new!"), 100<<10)))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "state")); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("state after the cut: %d bytes (%v), want the %d old ones", len(got), err, len(old))
	}
	if got := content(t, filepath.Join(backing, "untouched")); got != "kept" {
		t.Fatalf("untouched after the cut: %q", got)
	}
}
