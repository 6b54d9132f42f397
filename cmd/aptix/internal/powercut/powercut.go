// Package powercut is a FUSE file system for fault tests that simulates a
// power loss: a loopback over a backing directory that passes every
// operation through, remembers what each file's last fsync made durable, and
// on Cut puts every file back to that state.
//
// The model, and why:
//
//   - A file's data is durable as of its last fsync (an fsync on any handle
//     of it, or a write through a handle opened O_SYNC/O_DSYNC). Writes after
//     it are lost at the cut: bytes overwritten inside the durable length get
//     their old value back, the file is truncated to its durable length. A
//     file created while mounted and never fsynced is removed. This is the
//     page cache being lost with nothing written back: no background
//     writeback, which a real kernel does every few seconds, so the model is
//     the worst case a correct disk allows for data.
//   - Names (create, rename, unlink, mkdir, rmdir) are durable at once, as
//     if the file system's journal committed every namespace change before
//     returning. A journaling file system commits them at the next fsync of
//     anything or within seconds; strict POSIX wants the directory fsynced.
//     nats-server fsyncs its message directory only after a compaction, so
//     under strict POSIX a block it created and fsynced could lose its name
//     entirely; on ext4 or XFS an fsync of the file commits its name too.
//     Immediate names model that and keep the test about the data, at a
//     price: a removed or replaced file never comes back, and a file
//     replaced by rename whose data was never fsynced (nats-server's
//     consumer state under an interval policy is written so) is gone, where
//     ext4's rename heuristic would usually keep the old or the new content.
//
// Not modelled: torn sectors, a disk that acknowledges a flush it has not
// done, reordering inside one file's unsynced writes (all of them are lost,
// none kept), fallocate and copy_file_range (refused, so callers fall back to
// writes), mmap writes. Files that existed before the mount count as durable
// until written.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted power-cut file system.
type FS struct {
	backing, mnt string
	server       *fuse.Server

	mu    sync.Mutex
	files map[uint64]*durable // by backing inode number: stable across renames
	cut   bool
}

// durable is what a power loss leaves of one file.
type durable struct {
	synced bool  // fsynced at least once, or existed before the mount
	size   int64 // length at the last fsync
	undo   []undo
}

// undo is old content of the durable part, saved before a write or a
// truncation changed it; applied newest first it gives the fsynced bytes.
type undo struct {
	off  int64
	data []byte
}

// Mount serves backing at mnt (both existing directories). It needs root
// and /dev/fuse: it calls mount(2) itself, without the fusermount helper.
func Mount(backing, mnt string) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, fmt.Errorf("powercut: backing dir: %w", err)
	}
	p := &FS{backing: backing, mnt: mnt, files: map[uint64]*durable{}}
	root := &gofs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("powercut: backing dir: %w", err)
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, p: p}
	}
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	// Only this mount changes the backing dir while it is up, so the
	// kernel may cache names and attributes.
	sec := time.Second
	server, err := gofs.Mount(mnt, rootNode, &gofs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMountStrict: true, FsName: "powercut", Name: "powercut", MaxBackground: 64},
	})
	if err != nil {
		return nil, fmt.Errorf("powercut: mount %s: %w", mnt, err)
	}
	p.server = server
	return p, nil
}

// Dir is the mount point.
func (p *FS) Dir() string { return p.mnt }

// Backing is the directory the files are stored in.
func (p *FS) Backing() string { return p.backing }

// Unmount ends the mount and keeps every write: an orderly shutdown.
func (p *FS) Unmount() error {
	return p.unmount()
}

func (p *FS) unmount() error {
	var err error
	// A process that just died may still hold files open for a moment.
	for range 50 {
		if err = p.server.Unmount(); err == nil {
			p.server.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("powercut: unmount %s: %w", p.mnt, err)
}

// Report is what a cut did.
type Report struct {
	Removed  int      // files never fsynced
	Paths    []string // the removed files, relative to the backing dir
	Restored int      // files put back to their last fsync
	Dropped  int64    // bytes past the durable lengths
}

func (r Report) String() string {
	return fmt.Sprintf("%d files removed (never fsynced), %d put back to their last fsync (%d bytes past it dropped)", r.Removed, r.Restored, r.Dropped)
}

// Cut is the power loss: it unmounts (whoever still writes gets errors),
// then puts every file in the backing dir back to its durable state. The
// backing dir is then what the disk would hold when power returns.
func (p *FS) Cut() (Report, error) {
	var r Report
	if err := p.unmount(); err != nil {
		return r, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	return r, filepath.WalkDir(p.backing, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("powercut: cut %s: %w", path, err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		dur := p.files[st.Ino]
		switch {
		case dur == nil:
			return nil // never written while mounted
		case !dur.synced:
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("powercut: cut %s: %w", path, err)
			}
			r.Removed++
			if rel, err := filepath.Rel(p.backing, path); err == nil {
				r.Paths = append(r.Paths, rel)
			}
			return nil
		case len(dur.undo) == 0 && info.Size() == dur.size:
			return nil // nothing written since its last fsync
		}
		r.Restored++
		r.Dropped += max(info.Size()-dur.size, 0)
		return restore(path, dur)
	})
}

func restore(path string, dur *durable) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powercut: cut %s: %w", path, err)
	}
	defer f.Close()
	for i := len(dur.undo) - 1; i >= 0; i-- {
		u := dur.undo[i]
		if _, err := f.WriteAt(u.data, u.off); err != nil {
			return fmt.Errorf("powercut: cut %s: %w", path, err)
		}
	}
	if err := f.Truncate(dur.size); err != nil {
		return fmt.Errorf("powercut: cut %s: %w", path, err)
	}
	return f.Sync()
}

// state is the file's record, made on first sight: a file that existed
// before the mount is durable as it stands.
func (p *FS) state(ino uint64, f *os.File) *durable {
	if d := p.files[ino]; d != nil {
		return d
	}
	d := &durable{synced: true}
	if fi, err := f.Stat(); err == nil {
		d.size = fi.Size()
	}
	p.files[ino] = d
	return d
}

// save keeps the durable bytes in [off, end) that are about to change.
// Lock held.
func (d *durable) save(f *os.File, off, end int64) error {
	end = min(end, d.size)
	if !d.synced || off >= end {
		return nil
	}
	buf := make([]byte, end-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if n > 0 {
		d.undo = append(d.undo, undo{off: off, data: buf[:n]})
	}
	return nil
}

func (p *FS) synced(ino uint64, f *os.File) syscall.Errno {
	fi, err := f.Stat()
	if err != nil {
		return gofs.ToErrno(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.state(ino, f)
	d.synced, d.size, d.undo = true, fi.Size(), nil
	return 0
}

type node struct {
	gofs.LoopbackNode
	p *FS
}

func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

var (
	_ gofs.NodeCreater         = (*node)(nil)
	_ gofs.NodeOpener          = (*node)(nil)
	_ gofs.NodeSetattrer       = (*node)(nil)
	_ gofs.NodeCopyFileRanger  = (*node)(nil)
	_ gofs.NodeAllocater       = (*node)(nil)
	_ gofs.FileWriter          = (*handle)(nil)
	_ gofs.FileWritever        = (*handle)(nil)
	_ gofs.FileFsyncer         = (*handle)(nil)
	_ gofs.FileAllocater       = (*handle)(nil)
	_ gofs.FilePassthroughFder = (*handle)(nil)
)

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fflags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, fflags, errno
	}
	// The loopback's handle owns its fd; a second one, for reading the old
	// bytes and fsync bookkeeping, keeps this package off its internals.
	f, err := os.OpenFile(filepath.Join(n.path(), name), os.O_RDWR, 0)
	if err != nil {
		_ = fh.(gofs.FileReleaser).Release(ctx)
		return nil, nil, 0, gofs.ToErrno(err)
	}
	c := ch.Operations().(*node)
	n.p.mu.Lock()
	n.p.files[c.ino()] = &durable{} // new: not durable until fsynced
	n.p.mu.Unlock()
	return ch, &handle{LoopbackFile: fh.(*gofs.LoopbackFile), f: f, n: c, sync: isSync(flags)}, fflags, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		if errno := n.truncating(0); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, fflags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return fh, fflags, errno
	}
	lf, ok := fh.(*gofs.LoopbackFile)
	if !ok || n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fh, fflags, 0
	}
	f, err := os.OpenFile(n.path(), os.O_RDWR, 0)
	if err != nil {
		// Read-only files (no write can come through this handle).
		return fh, fflags, 0
	}
	return &handle{LoopbackFile: lf, f: f, n: n, sync: isSync(flags)}, fflags, 0
}

func isSync(flags uint32) bool {
	return flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0
}

// truncating saves what a truncation to size is about to drop.
func (n *node) truncating(size int64) syscall.Errno {
	f, err := os.Open(n.path())
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return gofs.ToErrno(err)
	}
	n.p.mu.Lock()
	defer n.p.mu.Unlock()
	if err := n.p.state(n.ino(), f).save(f, size, fi.Size()); err != nil {
		return gofs.ToErrno(err)
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG {
		if errno := n.truncating(int64(sz)); errno != 0 {
			return errno
		}
	}
	if h, ok := fh.(*handle); ok {
		fh = h.LoopbackFile // the loopback calls its own Setattr
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// CopyFileRange and Allocate are refused: the kernel and Go fall back to
// reads and writes, which are tracked.
func (n *node) CopyFileRange(context.Context, gofs.FileHandle, uint64, *gofs.Inode, gofs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.EOPNOTSUPP
}

func (n *node) Allocate(context.Context, gofs.FileHandle, uint64, uint64, uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

// handle is an open regular file: the loopback's handle for everything,
// with writes and fsyncs recorded first.
type handle struct {
	*gofs.LoopbackFile
	f    *os.File
	n    *node
	sync bool
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.n.p.mu.Lock()
	if h.n.p.cut {
		h.n.p.mu.Unlock()
		return 0, syscall.EIO
	}
	if err := h.n.p.state(h.n.ino(), h.f).save(h.f, off, off+int64(len(data))); err != nil {
		h.n.p.mu.Unlock()
		return 0, gofs.ToErrno(err)
	}
	// Written under the lock: the saved bytes are the ones overwritten.
	w, errno := h.LoopbackFile.Write(ctx, data, off)
	h.n.p.mu.Unlock()
	if errno == 0 && h.sync {
		errno = h.n.p.synced(h.n.ino(), h.f)
	}
	return w, errno
}

func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var all []byte
	for _, b := range data {
		all = append(all, b...)
	}
	return h.Write(ctx, all, off)
}

// Fsync makes the file's current content its durable state. The backing
// file is not fsynced: its own durability is not what is simulated.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.n.p.synced(h.n.ino(), h.f)
}

func (h *handle) Allocate(context.Context, uint64, uint64, uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

// PassthroughFd is refused: kernel passthrough would bypass the writes'
// bookkeeping.
func (h *handle) PassthroughFd() (int, bool) { return 0, false }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	_ = h.f.Close()
	return h.LoopbackFile.Release(ctx)
}
