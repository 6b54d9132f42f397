//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockFileName is the lock file in the --data dir.
const lockFileName = "aptix.lock"

// errDataDirInUse is wrapped by lockDataDir when another process holds the lock.
var errDataDirInUse = errors.New("data dir in use")

// lockDataDir takes an exclusive flock on <dir>/aptix.lock and writes this
// process's pid in it. Two embedded nats-servers on one JetStream directory
// corrupt each other's state, and the second process would then block for
// ever on the bleve index's own lock: taking this lock first makes a second
// `aptix up` (or an `aptix index` that would start an embedded server) fail
// at once, naming the holder. The kernel releases a flock when its process
// dies, so a crash never leaves a stale lock behind. what describes this
// process for the next one that finds the dir taken.
func lockDataDir(dir, what string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by %s; stop that one first, or give this one its own --data DIR",
				errDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+what+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// readHolder describes the lock's holder from what it wrote: "pid N (what)".
func readHolder(f *os.File) string {
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, 0)
	pid, what, _ := bytes.Cut(bytes.TrimSpace(buf[:n]), []byte(" "))
	if len(pid) == 0 {
		return "another process"
	}
	if len(what) == 0 {
		return fmt.Sprintf("another process (pid %s)", pid)
	}
	return fmt.Sprintf("%s (pid %s)", what, pid)
}

// dataDirHeld reports whether another open of dir's lock file holds it: an
// `aptix up` (or an embedded-NATS command) running on dir.
func dataDirHeld(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFileName))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
