package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// EnvCrashTest runs TestKill9PaysOnce: it builds bin/aptix and runs it as
// separate processes for about two minutes (`make test-crash`).
const EnvCrashTest = "APTIX_CRASH_TEST"

// killDelay is how long after the last request reached the sandbox the
// kill comes: every call is then generating (1.7s of its 2s left), and the
// caller has had the moment it needs to record the upstream id. A crash
// inside that moment repeats the call, with a warning (README, Reliability).
const killDelay = 300 * time.Millisecond

// TestKill9PaysOnce measures the window a crash leaves, at the
// upstream: `aptix sandbox --latency 2s` runs in its own process, `aptix up`
// takes 200 turns, is killed with SIGKILL once every call is in flight at
// the sandbox, and is started again on the same data dir. Every turn must
// complete once; the sandbox's own counters say how many responses were
// created. With the sandbox profile's reattach capability: 200 created, none
// twice. Without it (a profiles file turning it off) the cut-off calls are
// made again, and each repeat carries a warning.
func TestKill9PaysOnce(t *testing.T) {
	if os.Getenv(EnvCrashTest) == "" {
		t.Skip("set " + EnvCrashTest + "=1 (make test-crash): builds bin/aptix and runs it for about two minutes")
	}
	bin := filepath.Join(t.TempDir(), "aptix")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, reattach := range []bool{true, false} {
		t.Run(fmt.Sprintf("reattach=%v", reattach), func(t *testing.T) { kill9Run(t, bin, reattach, false, 200) })
	}
	// Killed during fallbacks: the default profile's backend answers 529,
	// every turn falls back to the sandbox profile (reattach on), and the
	// kill comes with every fallback call generating. Each turn is paid
	// once, on the fallback, and the failing backend is not the reason
	// for any repeat (docs/reliability.md#fallbacks-and-pay-once).
	t.Run("fallback", func(t *testing.T) { kill9Run(t, bin, true, true, 200) })
}

// kill9Run runs one phase; fallback makes every call fail over from a
// profile answering 529 to the sandbox profile.
func kill9Run(t *testing.T, bin string, reattach, fallback bool, turns int) {
	sbAddr, listen, data := freeAddr(t), freeAddr(t), t.TempDir()
	sb := startProc(t, bin, nil, "sandbox", "--addr", sbAddr, "--latency", "2s")
	sb.waitFor(t, "listening on")

	// Priced, so the usage totals can be checked against the turns' costs.
	const prices = `{"*":{"input":20,"output":20}}`
	env := []string{"OPENAI_API_KEY=", "APTIX_SANDBOX_URL=http://" + sbAddr + "/v1", "APTIX_PROFILES=", "APTIX_PROFILE_SANDBOX_PRICES=" + prices}
	if !reattach {
		file := filepath.Join(t.TempDir(), "profiles.json")
		prof := fmt.Sprintf(`{"default":"sandbox","profiles":{"sandbox":{"baseUrl":"http://%s/v1","defaultModel":"sandbox-1","maxConcurrent":256,"prices":%s,"capabilities":{"reattach":false}}}}`, sbAddr, prices)
		if err := os.WriteFile(file, []byte(prof), 0o600); err != nil {
			t.Fatal(err)
		}
		env[2] = "APTIX_PROFILES=" + file
	}
	if fallback {
		file := filepath.Join(t.TempDir(), "profiles.json")
		prof := fmt.Sprintf(`{"default":"flaky","profiles":{`+
			`"flaky":{"baseUrl":"http://%[1]s/v1","defaultModel":"sandbox-1","maxRetries":0,"maxConcurrent":256,"sandbox":true,"headers":{"X-Sandbox-Fault":"529"},"fallbacks":["sandbox"]},`+
			`"sandbox":{"baseUrl":"http://%[1]s/v1","defaultModel":"sandbox-1","maxConcurrent":256,"sandbox":true,"prices":%[2]s,"capabilities":{"reattach":true}}}}`, sbAddr, prices)
		if err := os.WriteFile(file, []byte(prof), 0o600); err != nil {
			t.Fatal(err)
		}
		env[2] = "APTIX_PROFILES=" + file
	}
	upArgs := []string{"up", "--listen", listen, "--data", data, "--http", ""}
	up := startProc(t, bin, env, upArgs...)
	up.waitFor(t, "Aptix is up.")

	js := connectUp(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range turns {
		req := contracts.AgentExecuteRequest{ConversationId: fmt.Sprintf("crash-c%d", i), TurnId: fmt.Sprintf("crash-t%d", i),
			Mode: "DEFAULT", Instruction: fmt.Sprintf("crash turn %d", i)}
		if err := client.Submit(ctx, js, req); err != nil {
			t.Fatal(err)
		}
	}
	// Every call in flight at the upstream (its request received, the model
	// generating for 2s), then SIGKILL.
	inFlight := func(st sandbox.Stats) bool { return st.Requests >= turns }
	if fallback {
		// The 529s count as requests too: wait for every fallback's response.
		inFlight = func(st sandbox.Stats) bool { return st.Created >= int64(turns) }
	}
	for !inFlight(sandboxStats(t, sbAddr)) {
		if ctx.Err() != nil {
			t.Fatalf("calls never all in flight: %+v", sandboxStats(t, sbAddr))
		}
		time.Sleep(20 * time.Millisecond)
	}
	delay := killDelay
	if v := os.Getenv("APTIX_CRASH_KILL_DELAY"); v != "" { // e.g. 0s: the worst moment
		if d, err := time.ParseDuration(v); err == nil {
			delay = d
		}
	}
	time.Sleep(delay)
	done := completed(t, js, turns)
	up.kill(t)
	atKill := sandboxStats(t, sbAddr)
	t.Logf("killed with %d responses created at the sandbox and %d turns completed", atKill.Created, done.turns)

	up = startProc(t, bin, env, upArgs...)
	up.waitFor(t, "Aptix is up.")
	var got completions
	for {
		got = completed(t, js, turns)
		if got.turns == turns || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	st := sandboxStats(t, sbAddr)
	twice := 0
	for _, n := range st.ByInstruction {
		if n > 1 {
			twice++
		}
	}
	t.Logf("FIGURES reattach=%v fallback=%v: %d/%d turns completed, %d duplicate completions; upstream: %d responses created (%d background), %d turns created more than once, %d reads, %d stream resumes; %d results warn of a repeated call",
		reattach, fallback, got.turns, turns, got.dups, st.Created, st.Background, twice, st.Reads, st.Resumes, got.warned)
	if got.turns != turns || got.dups != 0 {
		t.Fatalf("%d/%d turns completed, %d duplicates", got.turns, turns, got.dups)
	}
	checkUsage(ctx, t, js, got)
	if reattach && delay < killDelay {
		// Killed before every call had recorded its upstream id: repeats
		// are allowed, but only with a warning.
		if int64(got.warned) != st.Created-int64(turns) || twice != got.warned {
			t.Fatalf("with reattach, early kill: %d created for %d turns but %d warned", st.Created, turns, got.warned)
		}
		return
	}
	if reattach {
		if st.Created != int64(turns) || twice != 0 || got.warned != 0 {
			t.Fatalf("with reattach: %d created for %d turns, %d twice, %d warned", st.Created, turns, twice, got.warned)
		}
		return
	}
	if int64(got.warned) != st.Created-int64(turns) || twice != got.warned {
		t.Fatalf("without reattach: %d created for %d turns but %d results warned (%d turns created twice)", st.Created, turns, got.warned, twice)
	}
}

type completions struct {
	turns, dups, warned int
	costNanos           int64 // the completed turns' costs, each turn once
	unpriced            int
}

// checkUsage: the usage totals, folded across the kill, count every
// completed turn once and equal the sum of their costs, no more.
func checkUsage(ctx context.Context, t *testing.T, js jetstream.JetStream, got completions) {
	t.Helper()
	u, err := store.OpenUsage(ctx, js, 0)
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := u.Pending(ctx)
		if err == nil && n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("usage never folded: %d pending, %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, err := u.Report(ctx, spend.Filter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURES usage: %d turns, %d cost nanos (the completions' costs sum to %d), %d unpriced", r.Turns, r.CostNanos, got.costNanos, r.Unpriced)
	if got.unpriced != 0 || got.costNanos == 0 {
		t.Fatalf("%d completed turns unpriced, their costs sum to %d nanos: the sandbox is priced", got.unpriced, got.costNanos)
	}
	if r.Turns != int64(got.turns) || r.CostNanos != got.costNanos {
		t.Fatalf("usage totals %d turns, %d nanos; the completed turns: %d, %d nanos", r.Turns, r.CostNanos, got.turns, got.costNanos)
	}
}

// completed reads every completion in the stream so far.
func completed(t *testing.T, js jetstream.JetStream, want int) completions {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, contracts.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.SubjectPrefix + "." + contracts.StageCompleted + ".>"}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return completions{} // the server is restarting
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return completions{}
	}
	var c completions
	seen := map[string]bool{}
	for left := info.NumPending; left > 0; left-- {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			break
		}
		var turn contracts.Turn
		if json.Unmarshal(m.Data(), &turn) != nil {
			continue
		}
		if seen[turn.TurnId] {
			c.dups++
			continue
		}
		seen[turn.TurnId] = true
		c.turns++
		if r := turn.Response; r != nil && r.Cost != nil && !r.Cost.Unpriced {
			c.costNanos += r.Cost.Nanos()
		} else {
			c.unpriced++
		}
		for _, w := range turn.Warnings {
			if strings.Contains(w, "paid for twice") {
				c.warned++
				break
			}
		}
	}
	return c
}

func sandboxStats(t *testing.T, addr string) sandbox.Stats {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/_sandbox/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st sandbox.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// proc is a child process whose output the test watches.
type proc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...)}
	p.cmd.Env = append(os.Environ(), env...)
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		_ = w.Close()
	})
	return p
}

func (p *proc) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		p.mu.Lock()
		ok := strings.Contains(p.out.String(), s)
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("%v: no %q after 60s:\n%s", p.cmd.Args, s, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL: no drain, no deferred cleanup, as a crash.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// connectUp connects to the NATS of an `aptix up` child on listen,
// reconnecting through its restarts; closed when the test ends.
func connectUp(t *testing.T, listen string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("nats://"+listen, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
