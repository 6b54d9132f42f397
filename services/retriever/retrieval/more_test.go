package retrieval

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func TestUnreadableFileIsSkippedNotFatal(t *testing.T) {
	// chmod 000 does not stop root, so the read itself is made to fail.
	readFile = func(fsys fs.FS, name string) ([]byte, error) {
		if name == "net/retry.go" {
			return nil, fs.ErrPermission
		}
		return fs.ReadFile(fsys, name)
	}
	t.Cleanup(func() { readFile = fs.ReadFile })
	e := newEnv(t)
	s := e.index(fixture(t), "ws", "app")
	if s.Skipped[SkipUnreadable] != 1 || s.Files != 3 {
		t.Fatalf("summary %s", s)
	}
}

func TestEntryOverOneMBIsSkipped(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	// 700 KB of text whose JSON escaping doubles it past the entry limit.
	write(t, root, "quotes.txt", strings.Repeat(`"\"`+"\n", 700*1024/4))
	write(t, root, "ok.txt", "fine\n")
	s := e.index(root, "ws", "r")
	if s.Skipped[SkipEntryLarge] != 1 || s.Files != 1 || s.Written != 1 {
		t.Fatalf("summary %s", s)
	}
}

func TestRankingRules(t *testing.T) {
	e := newEnv(t)
	body := "package p\n\n// Frobnicate twiddles the widget knobs.\nfunc Frobnicate() {}\n"
	a, b := t.TempDir(), t.TempDir()
	write(t, a, "zeta/w.go", body)
	write(t, a, "alpha/w.go", body)
	write(t, a, "alpha/w_test.go", strings.Replace(body, "func Frobnicate", "func TestFrobnicate", 1))
	write(t, a, "notes.md", "# Notes\n\nUnrelated text about gardens.\n")
	write(t, b, "beta/w.go", body)
	e.index(a, "ws", "one")
	e.index(b, "ws", "two")
	ix := e.open()

	req := contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "twiddle widget knobs"}
	first := find(t, ix, req)
	// Equal scores: by path, then line, the test file after the code.
	want := "alpha/w.go beta/w.go zeta/w.go alpha/w_test.go"
	if got := strings.Join(paths(first), " "); got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
	if first[0].Score != first[1].Score || first[3].Score >= first[2].Score {
		t.Errorf("scores %v %v %v %v", first[0].Score, first[1].Score, first[2].Score, first[3].Score)
	}
	for range 5 {
		if again := find(t, ix, req); strings.Join(paths(again), " ") != want {
			t.Fatalf("order changed between runs: %v", paths(again))
		}
	}
	// Asking about tests lifts the demotion.
	if got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "test for TestFrobnicate"}); got[0].Path != "alpha/w_test.go" {
		t.Errorf("test query: %v", paths(got))
	}
	// In workspace scope the request's repo is preferred, not required.
	got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Repo: "two", Instruction: "twiddle widget knobs"})
	if got[0].Path != "beta/w.go" || len(got) != 4 {
		t.Errorf("repo boost: %v", paths(got))
	}
	// Language is matched without regard to case.
	if got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Language: "markdown", Instruction: "gardens widget"}); len(got) != 1 || got[0].Path != "notes.md" {
		t.Errorf("language filter: %v", paths(got))
	}
	// activeFiles scope returns the active file's chunks even when the
	// instruction shares no word with them, and only those.
	got = find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", RagScope: "activeFiles", ActiveFiles: []string{"./notes.md"}, Instruction: "twiddle widget knobs"})
	if len(got) != 1 || got[0].Path != "notes.md" || !strings.Contains(got[0].Content, "gardens") {
		t.Errorf("activeFiles scope: %+v", got)
	}
	// Repo scope without a repo has nothing to search.
	if got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", RagScope: "repo", Instruction: "twiddle"}); len(got) != 0 {
		t.Errorf("repo scope without repo: %v", paths(got))
	}
}

func TestSearchBeforeFirstLoadIsNotReady(t *testing.T) {
	e := newEnv(t)
	ix := e.open()
	if err := ix.WaitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
	ix.ready.Store(false) // as if the initial load were still running
	_, err := ix.Search(context.Background(), contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "x"})
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("err %v", err)
	}
	res, err := ix.Search(context.Background(), contracts.AgentExecuteRequest{WorkspaceId: "ws", RagScope: "none", Instruction: "x"})
	if err != nil || len(res.Chunks) != 0 || res.Chunks == nil {
		t.Fatalf("scope none: %+v %v", res, err)
	}
}

func TestLongInstructionIsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		b.WriteString("word")
		b.WriteString(strings.Repeat("x", i%50))
		b.WriteString(" ")
	}
	if terms := queryTerms(b.String(), MaxQueryTerms); len(terms) != MaxQueryTerms || terms[0] != "word" {
		t.Fatalf("%d terms, first %q", len(terms), terms[0])
	}
}

// A turn sent right after `aptix index` returns must see what it indexed,
// though this replica applies the writes a moment later (the README's first
// indexed turn found nothing on a busy CI machine).
func TestSearchReadsWritesThatFinishedBeforeIt(t *testing.T) {
	e := newEnv(t)
	ix := e.open()
	if err := ix.WaitSynced(context.Background()); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for i := range 400 {
		write(t, root, fmt.Sprintf("pkg%03d/file.go", i), fmt.Sprintf("package pkg%03d\n\n// Helper%03d does ordinary work number %d.\nfunc Helper%03d() int { return %d }\n", i, i, i, i, i))
	}
	write(t, root, "zzz/backoff.go", "package zzz\n\n// ScheduleRetry schedules the next retry with exponential backoff.\nfunc ScheduleRetry(attempt int) int { return attempt * attempt }\n")
	e.index(root, "ws", "r")
	res, err := ix.Search(context.Background(), contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "where are retries scheduled with backoff"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) == 0 || res.Chunks[0].Path != "zzz/backoff.go" {
		t.Fatalf("a search right after the index returned missed its writes: %v", paths(res.Chunks))
	}
}

// TestIndexKeepsGeneratedGo: generated Go is indexed (its chunks carry the
// generated shape, which the reranker weighs), but not a file of a
// per-platform family (one operating system and one architecture);
// another language's generated file is skipped as before.
func TestIndexKeepsGeneratedGo(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	write(t, root, "types/predicates.go", "// Code generated by \"go test -run=Generate\"; DO NOT EDIT.\n\npackage types\n\n// Implements reports whether a type implements an interface.\nfunc Implements(t, iface any) bool { return false }\n")
	write(t, root, "web/package-lock.json", "{\"name\": \"web\", \"lockfileVersion\": 3}\n")
	write(t, root, "sys/zerrors_linux_amd64.go", "// Code generated by mkerrors; DO NOT EDIT.\n\npackage sys\n\n// EPERM: operation not permitted.\nconst EPERM = 1\n")
	write(t, root, "sys/zsyscall_windows.go", "// Code generated by mksyscall_windows; DO NOT EDIT.\n\npackage sys\n\n// CloseHandle closes a handle.\nfunc CloseHandle(h uintptr) error { return nil }\n")
	s := e.index(root, "ws", "app")
	if s.Files != 2 || s.Skipped[SkipGenerated] != 2 {
		t.Fatalf("summary %s (skipped %v): want the two Go files built for more than one platform indexed, the one for linux/amd64 and the lock file skipped as generated", s, s.Skipped)
	}
	ix := e.open()
	got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: "does a type implement an interface"})
	if len(got) == 0 || got[0].Path != "types/predicates.go" {
		t.Fatalf("found %v, want types/predicates.go first", paths(got))
	}
}

// TestNamedPlatformFirst: the standard library declares the same constant
// in a file per platform (defs_linux_386.go, defs_linux_s390x.go ...), and
// their text cannot tell them apart: the platform a question names in a
// developer's words (IBM Z is s390x, 32-bit ARM is arm, NetBSD) puts its
// file first, and a question that names none puts the file built for
// every platform before those built for one.
func TestNamedPlatformFirst(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	for _, arch := range []string{"386", "amd64", "arm", "arm64", "loong64", "mips64x", "ppc64x", "riscv64", "s390x"} {
		build := "" // a family's name is a convention: its build constraint says it
		if strings.HasSuffix(arch, "x") {
			build = "//go:build linux && (" + strings.TrimSuffix(arch, "x") + " || " + strings.TrimSuffix(arch, "x") + "le)\n\n"
		}
		write(t, root, "rt/defs_linux_"+arch+".go", build+"package rt\n\n// Signal numbers of the kernel.\nconst (\n\t_SIGHUP  = 0x1\n\t_SIGINT  = 0x2\n\t_SIGQUIT = 0x3\n)\n")
	}
	for _, os := range []string{"freebsd", "netbsd", "openbsd", "darwin"} {
		write(t, root, "rt/os_"+os+".go", "package rt\n\n// sigaddset adds a signal to a blocked-signal mask.\nfunc sigaddset(mask *sigset, i int) { mask.bits[(i-1)/32] |= 1 << ((uint32(i) - 1) & 31) }\n")
	}
	write(t, root, "rt/signal.go", "package rt\n\n// sigaddset adds a signal to a blocked-signal mask, for the generic signal code.\nfunc sigaddset(mask *sigset, i int) { *mask |= 1 << (uint32(i) - 1) }\n")
	for i := range 30 { // so that the words are not common
		write(t, root, fmt.Sprintf("other/o%d.go", i), fmt.Sprintf("package other\n\n// O%d waits a while.\nfunc O%d() {}\n", i, i))
	}
	e.index(root, "ws", "app")
	ix := e.open()
	for _, c := range []struct{ q, want string }{
		{"the hangup signal's number on Linux for IBM Z", "rt/defs_linux_s390x.go"},
		{"hangup signal number on 32-bit ARM Linux", "rt/defs_linux_arm.go"},
		{"hangup signal number on Linux for 64-bit PowerPC", "rt/defs_linux_ppc64x.go"},
		{"on NetBSD, add a signal to a blocked-signal mask", "rt/os_netbsd.go"},
		{"add a signal to a blocked-signal mask", "rt/signal.go"},
	} {
		got := find(t, ix, contracts.AgentExecuteRequest{WorkspaceId: "ws", Instruction: c.q})
		if len(got) == 0 || got[0].Path != c.want {
			t.Errorf("%q found %v, want %s first", c.q, paths(got), c.want)
		}
	}
}
