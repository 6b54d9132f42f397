//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSecondUpOnTheSameDataDirFailsFast: with one `aptix up` running, a
// second one on its --data dir fails at once, naming the dir and the
// holder's pid, before it listens on anything.
func TestSecondUpOnTheSameDataDirFailsFast(t *testing.T) {
	startUp(t)
	second := freeAddr(t)
	start := time.Now()
	err := runUp(context.Background(), second, &bytes.Buffer{})
	if !errors.Is(err, errDataDirInUse) || !strings.Contains(err.Error(), dataDir) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second aptix up: %v; want data dir %s in use by pid %d", err, dataDir, os.Getpid())
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v to refuse", took)
	}
	if c, err := net.Dial("tcp", second); err == nil {
		c.Close()
		t.Errorf("the refused aptix up listens on %s", second)
	}
	if code := exitCode(err, true); code != exitFailure {
		t.Errorf("exit status %d, want %d", code, exitFailure)
	}
}

// TestDataDirLockIsReleased: the lock goes with its holder, so the next
// run on the dir starts.
func TestDataDirLockIsReleased(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataDir(dir, "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir, "second"); !errors.Is(err, errDataDirInUse) || !strings.Contains(err.Error(), "first (pid ") {
		t.Fatalf("want the dir in use by first, got %v", err)
	}
	release()
	release2, err := lockDataDir(dir, "second")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}

// TestSecondInterruptExits: the first SIGINT cancels the context (a
// graceful stop); the second exits at once, whatever the stop is doing.
func TestSecondInterruptExits(t *testing.T) {
	var exited atomic.Int32
	var out syncBuffer
	ctx, stop := interruptible(context.Background(), &out, func(code int) { exited.Store(int32(code)) })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("first SIGINT did not cancel the context")
	}
	if exited.Load() != 0 {
		t.Fatal("exited on the first SIGINT")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for exited.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if code := exited.Load(); code != exitInterrupted {
		t.Fatalf("second SIGINT: exit(%d), want exit(%d)\n%s", code, exitInterrupted, out.String())
	}
	if !strings.Contains(out.String(), "Ctrl-C again") {
		t.Errorf("no hint on the first interrupt: %q", out.String())
	}
}
