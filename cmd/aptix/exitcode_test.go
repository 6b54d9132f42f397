package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
)

// cli runs the CLI in-process as main does and returns the exit status and
// stderr. The global connection flags are restored afterwards, since flag
// values outlive one Execute.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	oldURL, oldData := natsURL, dataDir
	t.Cleanup(func() { natsURL, dataDir = oldURL, oldData })
	resetChanged(root)
	var stderr bytes.Buffer
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&stderr)
	code := execute(args, &stderr)
	return code, stderr.String()
}

// resetChanged forgets which flags earlier runs in this process set, so a
// required flag is missing again (their values stay).
func resetChanged(c *cobra.Command) {
	reset := func(f *pflag.Flag) { f.Changed = false }
	c.LocalFlags().VisitAll(reset)
	c.PersistentFlags().VisitAll(reset)
	for _, sub := range c.Commands() {
		resetChanged(sub)
	}
}

func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	notJSON := filepath.Join(dir, "tools.txt")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notJSON, []byte("[{"), 0o644); err != nil {
		t.Fatal(err)
	}
	nowhere := "nats://" + freeAddr(t)
	// Every exec case names its ids and files, since exec's flag values
	// persist from one case to the next.
	execArgs := func(conv, turn, tools string, rest ...string) []string {
		return append([]string{"exec", "--nats", nowhere, "--conversation", conv, "--turn", turn, "--tools", tools}, rest...)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"nope"}, 2, "unknown command"},
		{"unknown flag", []string{"exec", "--nope", "x"}, 2, "unknown flag"},
		{"missing argument", []string{"exec"}, 2, "requires at least 1 arg"},
		{"extra argument", []string{"up", "extra"}, 2, "unknown command"},
		{"missing required flag", []string{"render"}, 2, "required flag"},
		{"missing file", []string{"render", "--request", filepath.Join(dir, "none.json")}, 2, "no such file"},
		{"invalid request file", []string{"render", "--request", notJSON}, 2, "tools.txt"},
		{"wildcard conversation id", execArgs("bad.>", "t1", "", "hi"), 2, "conversationId: contains a NATS wildcard"},
		{"wildcard turn id", execArgs("c1", "*", "", "hi"), 2, "turnId: contains a NATS wildcard"},
		{"dot in id", execArgs("c1", "a.b", "", "hi"), 2, "turnId: contains a dot"},
		{"whitespace in id", execArgs("c 1", "t1", "", "hi"), 2, "conversationId: contains whitespace"},
		{"long id", execArgs(strings.Repeat("c", 129), "t1", "", "hi"), 2, "longer than 128"},
		{"empty conversation id", execArgs("", "t1", "", "hi"), 2, "--conversation is empty"},
		{"empty turn id", execArgs("c1", "", "", "hi"), 2, "--turn is empty"},
		{"empty instruction", execArgs("c1", "t1", "", " "), 2, "instruction: must not be empty"},
		{"empty tools file", execArgs("c1", "t1", empty, "hi"), 2, "the file is empty"},
		{"tools file not JSON", execArgs("c1", "t1", notJSON, "hi"), 2, "not valid JSON"},
		{"missing tools file", execArgs("c1", "t1", filepath.Join(dir, "none.json"), "hi"), 2, "no such file"},
		{"events wildcard", []string{"events", "--nats", nowhere, "--conversation", "a>b"}, 2, "ids are"},
		{"no server: runtime error", execArgs("c1", "t1", "", "hi"), 1, "no Aptix at " + nowhere},
		{"events without a server", []string{"events", "--nats", nowhere, "--conversation", "c1"}, 1, "no Aptix at"},
		{"index: no such dir", []string{"index", filepath.Join(dir, "none"), "--nats", nowhere}, 2, "no such file"},
		{"index: not a dir", []string{"index", empty, "--nats", nowhere}, 2, "not a directory"},
		{"index: bad workspace", []string{"index", dir, "--workspace", "a.b", "--nats", nowhere}, 2, "--workspace"},
		{"search: bad scope", []string{"search", "x", "--scope", "everything", "--workspace", "w", "--nats", nowhere}, 2, "ragScope"},
		{"search: no server", []string{"search", "x", "--scope", "", "--nats", nowhere}, 1, "connect to NATS"},
		{"up: bad --listen", []string{"up", "--data", dir, "--listen", "nohostport"}, 2, "--listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := cli(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("aptix %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
			}
		})
	}
}

// TestUnknownBackendProfileIsAnInputError: APTIX_BACKEND naming no
// profile is bad input (2), reported before anything starts.
func TestUnknownBackendProfileIsAnInputError(t *testing.T) {
	t.Setenv("APTIX_PROFILES", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("APTIX_BACKEND", "nope")
	code, stderr := cli(t, "up", "--data", t.TempDir(), "--listen", freeAddr(t))
	if code != exitUsage || !strings.Contains(stderr, `unknown backend profile "nope"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestFlagHelpHasNoStrayValueNames: pflag takes a back-quoted word of a
// usage string as the flag's value name, so "a running `aptix up`" printed
// as "--nats aptix up". A value name is one upper-case word or a type.
func TestFlagHelpHasNoStrayValueNames(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			name, usage := pflag.UnquoteUsage(f)
			if strings.ContainsAny(name, " `") || (name != strings.ToUpper(name) && !isTypeName(name)) {
				t.Errorf("aptix %s --%s: value name %q (usage %q)", c.Name(), f.Name, name, usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func isTypeName(s string) bool {
	switch s {
	case "", "string", "strings", "int", "uint", "uint64", "duration", "float", "float64", "int64":
		return true
	}
	return false
}

func TestExitCodeAtCapacity(t *testing.T) {
	if code := exitCode(fmt.Errorf("submit: %w", backpressure.ErrAtCapacity), true); code != exitTempFail {
		t.Errorf("a turn refused at capacity exits %d, want %d", code, exitTempFail)
	}
}

// TestExecToolChoiceWithoutTools: --tool-choice naming a tool on a new
// conversation without --tools is an input error (exit 2) saying so before
// anything is sent (it was sent, and failed in the pipeline); auto and
// none need no tools, and a continued conversation may have its own. A
// turn the envelope refuses for what it asked exits 2 too.
func TestExecToolChoiceWithoutTools(t *testing.T) {
	for _, c := range []struct {
		f    execFlags
		fail bool
	}{
		{execFlags{toolChoice: "ddr_document"}, true},
		{execFlags{toolChoice: "required"}, true},
		{execFlags{toolChoice: "auto"}, false},
		{execFlags{toolChoice: "none"}, false},
		{execFlags{toolChoice: "ddr_document", conversation: "c1"}, false},
	} {
		_, err := buildRequest(c.f, "hi")
		if got := err != nil; got != c.fail {
			t.Errorf("%+v: %v", c.f, err)
			continue
		}
		if c.fail && (exitCode(err, true) != exitUsage || !strings.Contains(err.Error(), "--tools")) {
			t.Errorf("%+v: exit %d, %v", c.f, exitCode(err, true), err)
		}
	}
	refused := contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "unknown_tool_choice", ErrorMessage: "names no function tool"}
	if code := exitCode(turnError(refused), true); code != exitUsage {
		t.Errorf("a turn refused for its tool choice exits %d", code)
	}
	if code := exitCode(turnError(contracts.AgentExecuteResponse{Kind: contracts.KindError, ErrorCode: "upstream_error"}), true); code != exitFailure {
		t.Errorf("a failed turn exits %d", code)
	}
}
