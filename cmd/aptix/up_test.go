package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// syncBuffer is a bytes.Buffer safe to read while runUp writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startUp runs `aptix up` in-process on free ports, with the sandbox as the
// default backend, and points the client flags at it.
func startUp(t *testing.T) *syncBuffer {
	t.Helper()
	out, _ := startUpIn(t, t.TempDir())
	return out
}

// startUpIn is startUp on data dir dir; stop stops it (and runs at cleanup
// when not called before).
// logsBeforeBanner is what the last startUp* read from upLogOut (when a
// test set it to a *syncBuffer) just before it saw the banner.
var logsBeforeBanner string

func startUpIn(t *testing.T, dir string) (out *syncBuffer, stop func()) {
	t.Helper()
	return startUpListen(t, dir, freeAddr(t), nil)
}

// startUpEnv is startUpIn with these environment variables set on top.
func startUpEnv(t *testing.T, dir string, env map[string]string) (out *syncBuffer, stop func()) {
	t.Helper()
	return startUpListen(t, dir, freeAddr(t), env)
}

// startUpListen is startUpIn with NATS listening on listen and env set.
func startUpListen(t *testing.T, dir, listen string, env map[string]string) (out *syncBuffer, stop func()) {
	t.Helper()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("APTIX_PROFILES", "")
	t.Setenv("APTIX_SANDBOX_URL", "http://"+freeAddr(t)+"/v1")
	for k, v := range env {
		t.Setenv(k, v)
	}
	oldURL, oldData, oldHTTP, oldMCP, oldInvoked := natsURL, dataDir, upHTTP, upMCP, invokedAs
	_, port, _ := net.SplitHostPort(listen)
	natsURL, dataDir, upHTTP, invokedAs = "nats://127.0.0.1:"+port, dir, freeAddr(t), "bin/aptix"
	if strings.HasPrefix(upMCP, "127.0.0.1:") {
		upMCP = freeAddr(t) // not the default port, which another process may hold; a test's own choice stays
	}
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runUp(ctx, listen, out) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("aptix up returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("aptix up did not stop within 30s")
			}
			if !strings.Contains(out.String(), "Aptix stopped.") {
				t.Errorf("up output lacks the stop line:\n%s", out)
			}
			natsURL, dataDir, upHTTP, upMCP, invokedAs = oldURL, oldData, oldHTTP, oldMCP, oldInvoked
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The logs are read before the output: what they hold was logged
		// before the banner was seen (up raises its log level only after
		// printing it), not in the poll's sleep after it.
		if logs, ok := upLogOut.(*syncBuffer); ok {
			logsBeforeBanner = logs.String()
		}
		if strings.Contains(out.String(), "Aptix is up.") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("aptix up exited early: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("aptix up not ready after 30s:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out, stop
}

func execTurn(t *testing.T, f execFlags, instruction string) (stdout, stderr string, err error) {
	t.Helper()
	if f.timeout == 0 {
		f.timeout = 30 * time.Second
	}
	var o, e bytes.Buffer
	err = runExec(context.Background(), f, instruction, &o, &e)
	return o.String(), e.String(), err
}

func TestUpExecEvents(t *testing.T) {
	up := startUp(t)
	// The hints are the binary as invoked, with --nats since the server is not the default.
	for _, want := range []string{"NATS:   " + natsURL, "SANDBOX", "NOT a model", "bin/aptix --nats " + natsURL + ` exec "Explain`,
		"bin/aptix --nats " + natsURL + " index . && bin/aptix --nats " + natsURL + ` exec "Where`,
		"HTTP:   http://" + upHTTP, "Console: http://" + upHTTP + "/console/", "curl -s http://" + upHTTP + "/v1/responses"} {
		if !strings.Contains(up.String(), want) {
			t.Errorf("up banner lacks %q:\n%s", want, up)
		}
	}
	// The banner's curl one-liner works: `aptix up` serves the gateway (docs/http-api.md).
	resp, err := http.Post("http://"+upHTTP+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"sandbox-1","input":"Explain what this service does"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"response"`) || !strings.Contains(string(body), "Explain what this service does") {
		t.Fatalf("gateway of aptix up: %d %s", resp.StatusCode, body)
	}

	out, _, err := execTurn(t, execFlags{conversation: "cli-1", mode: "DDR", system: "You write design docs."}, "Document the retry policy")
	if err != nil || !strings.Contains(out, "Sandbox reply (mode DDR) to: Document the retry policy.") {
		t.Fatalf("turn 1: err %v, out %q", err, out)
	}
	out, errOut, err := execTurn(t, execFlags{conversation: "cli-1", stream: true}, "Summarize it")
	if err != nil || !strings.Contains(out, "Continuing from resp_") {
		t.Fatalf("turn 2 did not continue turn 1: err %v, out %q", err, out)
	}
	if strings.Count(out, "Sandbox reply") != 1 {
		t.Errorf("streamed answer printed %d times:\n%s", strings.Count(out, "Sandbox reply"), out)
	}
	if !strings.Contains(errOut, "kind ok") {
		t.Errorf("summary line missing: %q", errOut)
	}
	if want := "continue with: bin/aptix --nats " + natsURL + ` exec --conversation cli-1 "..."`; !strings.Contains(errOut, want) {
		t.Errorf("continuation hint: want %q in %q", want, errOut)
	}

	out, _, err = execTurn(t, execFlags{conversation: "cli-2", toolsFile: "../../examples/ddr-tools.json", toolChoice: "ddr_document"}, "Document it")
	if err != nil || !strings.Contains(out, "tool call ddr_document (call_") {
		t.Fatalf("forced tool: err %v, out %q", err, out)
	}
	out, _, err = execTurn(t, execFlags{conversation: "cli-3", toolChoice: "nope"}, "x")
	if err == nil || !strings.Contains(err.Error(), "unknown_tool_choice") || !strings.Contains(out, "error unknown_tool_choice") {
		t.Fatalf("unknown tool choice: err %v, out %q", err, out)
	}
	// Refused for what it asked (a named conversation may have tools of
	// its own, so it was sent): an input error, as for a new one refused
	// before sending (TestExecToolChoiceWithoutTools).
	if code := exitCode(err, true); code != exitUsage {
		t.Errorf("a turn refused for its tool choice exits %d, want %d", code, exitUsage)
	}

	var list bytes.Buffer
	if err := runEvents(context.Background(), "cli-1", 0, false, &list); err != nil {
		t.Fatal(err)
	}
	if want := "bin/aptix --nats " + natsURL + " events --conversation cli-1 --seq "; !strings.Contains(list.String(), want) {
		t.Errorf("events hint: want %q in\n%s", want, list.String())
	}
	lines := strings.Split(strings.TrimSpace(list.String()), "\n")
	var stages []string
	var firstSeq uint64
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 6 {
			continue
		}
		stages = append(stages, f[2])
		if firstSeq == 0 {
			fmt.Sscan(f[0], &firstSeq)
		}
		if len(f[5]) != 32 {
			t.Errorf("event without a trace id: %q", l)
		}
	}
	// Requests live in the queue until the retriever takes them;
	// the history starts at retrieved, whose turn records the request.
	want := "retrieved enveloped responded completed retrieved enveloped responded completed"
	if got := strings.Join(stages, " "); got != want {
		t.Fatalf("events of cli-1:\n got %s\nwant %s\n%s", got, want, list.String())
	}
	var one bytes.Buffer
	if err := runEvents(context.Background(), "cli-1", firstSeq, false, &one); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(one.String(), `"instruction": "Document the retry policy"`) || !strings.Contains(one.String(), "traceparent: 00-") {
		t.Errorf("--seq %d output:\n%s", firstSeq, one.String())
	}
	if err := runEvents(context.Background(), "nobody", 0, false, &one); err == nil {
		t.Error("events of an unknown conversation: want an error")
	}
}

// TestConversationContinuesAfterRestart: the sandbox `aptix up` serves
// keeps its responses in the data dir, so a conversation continued after a
// restart still finds its previous_response_id (it failed with
// previous_response_not_found before).
func TestConversationContinuesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	_, stop := startUpIn(t, dir)
	if out, _, err := execTurn(t, execFlags{conversation: "restart-1"}, "First turn"); err != nil {
		t.Fatalf("turn 1: %v %s", err, out)
	}
	stop()
	startUpIn(t, dir)
	out, _, err := execTurn(t, execFlags{conversation: "restart-1"}, "Second turn")
	if err != nil || !strings.Contains(out, "Continuing from resp_") {
		t.Fatalf("turn 2 after a restart: err %v, out %q", err, out)
	}
}

func TestExecWithoutUpFailsFast(t *testing.T) {
	old := natsURL
	natsURL = "nats://" + freeAddr(t)
	defer func() { natsURL = old }()
	start := time.Now()
	_, _, err := execTurn(t, execFlags{}, "hello")
	if err == nil || !strings.Contains(err.Error(), "`"+invokedAs+" up`") {
		t.Fatalf("want a hint to start aptix up, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v to fail", time.Since(start))
	}
}

func TestUpRefusesBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	old := dataDir
	dataDir = t.TempDir()
	defer func() { dataDir = old }()
	err = runUp(context.Background(), ln.Addr().String(), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "another `aptix up`") {
		t.Fatalf("want a busy-port error, got %v", err)
	}
}

// TestUpServesTheSandboxItLists: with OPENAI_API_KEY set the default
// backend is openai, yet GET /v1/models lists the sandbox profile's
// sandbox-1; aptix up serves it, so a request for it is answered (it was a
// 502, connection refused, the sandbox not being started).
func TestUpServesTheSandboxItLists(t *testing.T) {
	startUpEnv(t, t.TempDir(), map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
	resp, err := http.Get("http://" + upHTTP + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"sandbox-1"`) {
		t.Fatalf("/v1/models: %s", body)
	}
	resp, err = http.Post("http://"+upHTTP+"/v1/responses", "application/json", strings.NewReader(`{"model":"sandbox-1","input":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("model sandbox-1: %d %s", resp.StatusCode, body)
	}
}

// TestUpLogsAroundTheBanner: the banner is not buried in start-up logs
// (about 25 JSON info lines surrounded it): before it only warnings, after
// it the info level; a turn and a clean stop log no error (the local index
// logged one at every stop).
func TestUpLogsAroundTheBanner(t *testing.T) {
	logs := &syncBuffer{}
	old := upLogOut
	upLogOut = logs
	defer func() { upLogOut = old }()
	t.Setenv("APTIX_LOG_LEVEL", "")
	_, stop := startUpIn(t, t.TempDir())
	before := logsBeforeBanner
	for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
		if line != "" && !strings.Contains(line, `"level":"WARN"`) {
			t.Errorf("before the banner: %s", line)
		}
	}
	if n := strings.Count(before, "\n"); n > 3 {
		t.Errorf("%d log lines before the banner:\n%s", n, before)
	}
	if _, _, err := execTurn(t, execFlags{conversation: "logs-1"}, "hello"); err != nil {
		t.Fatal(err)
	}
	stop()
	all := logs.String()
	if strings.Contains(all, `"level":"ERROR"`) {
		t.Errorf("a turn and a clean stop logged an error:\n%s", all)
	}
	if !strings.Contains(all[len(before):], `"msg":"stage drained"`) {
		t.Errorf("info lines after the banner missing:\n%s", all[len(before):])
	}
	if strings.Contains(all, `"msg":"Adding handler"`) || strings.Contains(all, `"msg":"Closing router"`) {
		t.Errorf("the router's own info lines are debug:\n%s", all)
	}
}

// TestUpHelpNamesEveryStage: `aptix up --help` names every stage it runs
// (it said "all four stages" while five run).
func TestUpHelpNamesEveryStage(t *testing.T) {
	cmd, _, err := root.Find([]string{"up"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cmd.Long, "four") {
		t.Errorf("up --help: %s", cmd.Long)
	}
	for _, st := range layout.Stages {
		if !strings.Contains(cmd.Long, st.Name) {
			t.Errorf("up --help does not name the %s stage:\n%s", st.Name, cmd.Long)
		}
	}
}

// TestUpCompactionKeysSurviveRestart: without APTIX_COMPACTION_KEYS, `up`
// keeps a gateway key and a sandbox key in its data dir (mode 0600), so the
// compaction items of both (the pipeline's summary, aptix3., and the
// sandbox's own, sbxc2., which up forwards explicit input to) still open
// after a restart; an altered one is a 400 on the item.
func TestUpCompactionKeysSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("APTIX_COMPACTION_KEYS", "")
	_, stop := startUpIn(t, dir)
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+upHTTP+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	blob := func(body string) string {
		t.Helper()
		var c struct {
			Output []struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			} `json:"output"`
		}
		_ = json.Unmarshal([]byte(body), &c)
		for _, it := range c.Output {
			if it.Type == "compaction" {
				return it.EncryptedContent
			}
		}
		t.Fatalf("no compaction item in %s", body)
		return ""
	}
	code, body := post("/v1/responses", `{"model":"sandbox-1","input":"The launch code is Z-42"}`)
	var r1 struct{ ID string }
	if code != 200 || json.Unmarshal([]byte(body), &r1) != nil {
		t.Fatalf("turn: %d %s", code, body)
	}
	code, body = post("/v1/responses/compact", `{"model":"sandbox-1","previous_response_id":"`+r1.ID+`"}`)
	if code != 200 {
		t.Fatalf("compact (pipeline): %d %s", code, body)
	}
	gw := blob(body)
	code, body = post("/v1/responses/compact", `{"model":"sandbox-1","input":"The launch code is Z-42"}`)
	if code != 200 {
		t.Fatalf("compact (sandbox): %d %s", code, body)
	}
	sb := blob(body)
	if !strings.HasPrefix(gw, "aptix3.") || !strings.HasPrefix(sb, "sbxc2.") || strings.Contains(gw+sb, "Z-42") {
		t.Fatalf("items %q %q", gw, sb)
	}
	for _, f := range []string{"compaction.keys", "sandbox/compaction.keys"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st, err)
		}
	}
	stop()
	startUpIn(t, dir)
	for _, b := range []string{gw, sb} {
		code, body = post("/v1/responses", `{"model":"sandbox-1","input":[{"type":"compaction","encrypted_content":"`+b+`"},{"role":"user","content":"What was the code?"}]}`)
		if code != 200 {
			t.Fatalf("after a restart, %s…: %d %s", b[:10], code, body)
		}
		code, body = post("/v1/responses", `{"model":"sandbox-1","input":[{"type":"compaction","encrypted_content":"`+b[:len(b)-4]+`AAAA"},{"role":"user","content":"What was the code?"}]}`)
		if code != 400 || !strings.Contains(body, "invalid_encrypted_content") {
			t.Fatalf("altered %s…: %d %s", b[:10], code, body)
		}
	}
}

// TestServeSandboxRefusesAForeignServer: a sandbox address taken by
// something other than an Aptix sandbox fails `aptix up` with a message
// saying so (it was used silently, and a foreign process got every
// prompt); one taken by an Aptix sandbox is used.
func TestServeSandboxRefusesAForeignServer(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer foreign.Close()
	if _, err := serveSandbox(foreign.URL+"/v1", log); err == nil || !strings.Contains(err.Error(), "not an Aptix sandbox") {
		t.Fatalf("foreign server: %v", err)
	}
	sb := sandbox.New(sandbox.Options{})
	defer sb.Close()
	ours := httptest.NewServer(sb)
	defer ours.Close()
	stop, err := serveSandbox(ours.URL+"/v1", log)
	if err != nil {
		t.Fatalf("an Aptix sandbox: %v", err)
	}
	stop()
}

// TestUpBannerListsLoadedProfiles: with a profiles file the banner lists
// the profiles it loaded, the default marked, and does not tell the user to
// set APTIX_PROFILES (it did, and listed none).
func TestUpBannerListsLoadedProfiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(file, []byte(`{"default":"sandbox","profiles":{"local":{"baseUrl":"http://127.0.0.1:1/v1"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := startUpEnv(t, t.TempDir(), map[string]string{"APTIX_PROFILES": file})
	banner := out.String()
	if strings.Contains(banner, "set OPENAI_API_KEY or APTIX_PROFILES") {
		t.Errorf("the banner tells to set APTIX_PROFILES while it is set:\n%s", banner)
	}
	if want := "Profiles: local, openai, sandbox (default) (from " + file + ")"; !strings.Contains(banner, want) {
		t.Errorf("banner lacks %q:\n%s", want, banner)
	}
}
