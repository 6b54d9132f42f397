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

// TestClientFindsUpOnItsListenAddress: with `aptix up --listen` on another
// port than the default, a plain `aptix index` (connectNATS) and `aptix
// exec` (connectRunning) on the same --data reach that server instead of
// starting an embedded one (index did, and indexed into it unseen) or
// failing; once up stops, or when it was killed, the record is not trusted.
func TestClientFindsUpOnItsListenAddress(t *testing.T) {
	dir := t.TempDir()
	_, stop := startUpIn(t, dir)
	upURL := natsURL
	natsURL = "" // a plain command: no --nats, no APTIX_NATS_URL
	if upURL == DefaultNATSURL {
		t.Fatal("the test needs up on a non-default address")
	}
	nc, closeNC, err := connectNATS("index")
	if err != nil {
		t.Fatalf("connectNATS: %v", err)
	}
	got := nc.ConnectedUrl()
	closeNC()
	if got != upURL {
		t.Fatalf("index connected to %q, want the running up's %s", got, upURL)
	}
	rc, err := connectRunning("exec")
	if err != nil {
		t.Fatalf("connectRunning: %v", err)
	}
	if got := rc.ConnectedUrl(); got != upURL {
		t.Fatalf("exec connected to %q, want %s", got, upURL)
	}
	rc.Close()
	if clientServer() != upURL {
		t.Fatalf("hints name %s, want %s", clientServer(), upURL)
	}
	stop()
	if u := runningUpURL(dir); u != "" {
		t.Fatalf("after up stopped, the record still says %q", u)
	}
	// A record left by a killed up (the lock is free) is ignored.
	if _, err := writeRunningURL(dir, "nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if u := runningUpURL(dir); u != "" {
		t.Fatalf("a stale record was trusted: %q", u)
	}
}
