//go:build containers

package containers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

var single = []string{"nats"}

// TestMultiTurnConversation: a two-turn conversation through the four stage
// processes against a NATS container.
func TestMultiTurnConversation(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	d.sandbox(0)
	d.pipelineStages(single, 1, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})

	first := contracts.AgentExecuteRequest{ConversationId: "conv-mt", TurnId: "mt-1", Mode: "DDR",
		Instruction: "Document the retry policy", ConversationContext: &contracts.ConversationContext{SystemPrompt: "You write DDRs."},
		ToolsJson:      `[{"type":"function","name":"ddr_document","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}]`,
		ToolChoiceName: "ddr_document"}
	done, acked := c.sendAll([]contracts.AgentExecuteRequest{first}, 1, time.Minute, nil)
	r1 := done["mt-1"].Response
	if acked != 1 || r1 == nil || r1.Kind != contracts.KindToolOnly || len(r1.ToolCalls) != 1 || r1.ToolCalls[0].Name != "ddr_document" {
		t.Fatalf("turn 1: %+v", r1)
	}
	second := contracts.AgentExecuteRequest{ConversationId: "conv-mt", TurnId: "mt-2", Mode: "DDR", Instruction: "Now summarize it"}
	done, _ = c.sendAll([]contracts.AgentExecuteRequest{second}, 1, time.Minute, nil)
	r2 := done["mt-2"].Response
	if r2 == nil || r2.Kind != contracts.KindOK || !strings.Contains(r2.Text, "Continuing from "+r1.ResponseContinuationId) {
		t.Fatalf("turn 2 did not continue turn 1 (%s): %+v", r1.ResponseContinuationId, r2)
	}
	t.Logf("turn 1: %s %s(%s); turn 2: %q", r1.Kind, r1.ToolCalls[0].Name, r1.ToolCalls[0].ArgumentsJson, r2.Text)
}

// TestScaleOut: three llmcaller replicas share 300 turns through one
// durable consumer; every turn completes once and each replica did some.
func TestScaleOut(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	sb := d.sandbox(20 * time.Millisecond)
	d.pipelineStages(single, 3, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 3, "mapper": 1})

	reqs := turns("scale", 300)
	done, acked := c.sendAll(reqs, 64, 2*time.Minute, nil)
	time.Sleep(time.Second) // let a late duplicate, if any, arrive
	completed, dups, bad := c.comp.Counts()
	per := c.processed("llmcaller")
	var sum int64
	for _, p := range per {
		sum += p
	}
	calls := d.upstreamCalls(sb)
	t.Logf("sent 300, acknowledged %d, completed %d (distinct %d), duplicates %d, undecodable %d; per llmcaller replica %v (sum %d); upstream calls %d",
		acked, len(done), completed, dups, bad, per, sum, total(calls))
	if acked != 300 || len(done) != 300 || completed != 300 || dups != 0 || bad != 0 {
		t.Fatal("not every turn completed exactly once")
	}
	if len(per) != 3 || sum != 300 {
		t.Fatalf("replicas processed %v, want 3 replicas summing to 300", per)
	}
	for i, p := range per {
		if p == 0 {
			t.Errorf("replica %d did no turn", i)
		}
	}
	for _, r := range reqs {
		if calls[r.Instruction] != 1 {
			t.Errorf("turn %s: %d upstream calls", r.TurnId, calls[r.Instruction])
		}
	}
}

// TestSigkillStageMidLoad SIGKILLs one stage container with 100 turns in
// flight and starts it again. Every turn completes exactly once. Killing the
// llmcaller may re-call turns whose call was cut off (their result was never
// stored); a turn whose result was stored is never called again. Killing the
// mapper, after every result was stored, costs no upstream call at all.
func TestSigkillStageMidLoad(t *testing.T) {
	for _, victim := range []string{"llmcaller", "mapper"} {
		t.Run(victim, func(t *testing.T) { sigkillMidLoad(t, victim) })
	}
}

func sigkillMidLoad(t *testing.T, victim string) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	sb := d.sandbox(500 * time.Millisecond)
	stages := d.pipelineStages(single, 1, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})

	target := stages[victim][0]
	reqs := turns("kill-"+victim, 100)
	killedAt := make(chan int, 1)
	go func() {
		// Kill once some turns are through and the rest are in flight.
		deadline := time.Now().Add(time.Minute)
		for {
			done, _, _ := c.comp.Counts()
			calls, _ := d.upstreamCallsErr(sb)
			inFlight := total(calls) - done // upstream calls made for turns not yet completed
			if done >= 10 && inFlight >= 20 || time.Now().After(deadline) {
				sigkill(t, target)
				killedAt <- done
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second)
		if err := target.Start(context.Background()); err != nil {
			t.Errorf("restart %s: %v", victim, err)
		}
	}()
	// The turns go out 10 ms apart: sent at once, they reach the sandbox
	// together and, answered after the same latency, complete in one
	// burst, too fast for the poll above to see some through and the rest
	// in flight (it missed that once, and the kill came after the load).
	spread := func(int) { time.Sleep(10 * time.Millisecond) }
	done, acked := c.sendAll(reqs, 100, 3*time.Minute, spread)
	before := <-killedAt
	time.Sleep(time.Second)
	completed, dups, _ := c.comp.Counts()
	calls := d.upstreamCalls(sb)
	var cached, repaid, recalled int
	for _, r := range reqs {
		if calls[r.Instruction] > 1 {
			recalled++
		}
		if tr, ok := done[r.TurnId]; ok && tr.LLM != nil && tr.LLM.Cached {
			cached++
			if calls[r.Instruction] != 1 {
				repaid++
			}
		}
	}
	t.Logf("SIGKILL %s after %d of 100 turns completed; acknowledged %d, completed %d (distinct %d), duplicate completions %d; upstream calls %d, turns called more than once %d; results served from the pay-once store %d, of which called again %d",
		victim, before, acked, len(done), completed, dups, total(calls), recalled, cached, repaid)
	if before >= 100 {
		t.Fatal("the kill came after the load was over")
	}
	if acked != 100 || len(done) != 100 || completed != 100 || dups != 0 {
		t.Fatal("not every turn completed exactly once")
	}
	for id, tr := range done {
		if tr.Response == nil || tr.Response.Kind != contracts.KindOK {
			t.Errorf("turn %s: %+v", id, tr.Response)
		}
	}
	if repaid != 0 {
		t.Fatalf("%d turns with a stored result were paid for again", repaid)
	}
	if victim == "mapper" && total(calls) != 100 {
		t.Fatalf("killing the mapper cost %d upstream calls for 100 turns", total(calls))
	}
}

// TestClusterNodeLoss: three NATS nodes, the stream at three replicas; one
// node is stopped mid-load and started again. No acknowledged turn is lost.
func TestClusterNodeLoss(t *testing.T) {
	d := newDeployment(t)
	nodes := []string{"nats-1", "nats-2", "nats-3"}
	n1 := d.natsNode("nats-1", true)
	n2 := d.natsNode("nats-2", true)
	n3 := d.natsNode("nats-3", true)
	d.sandbox(20 * time.Millisecond)
	d.pipelineStages(nodes, 1, map[string]string{"APTIX_STREAM_REPLICAS": "3"})
	c := d.client(n1, n3)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})

	reqs := turns("cluster", 200)
	restarted := make(chan struct{})
	done, acked := c.sendAll(reqs, 16, 3*time.Minute, func(sent int) {
		switch sent {
		case 60: // stop a node with turns in flight
			go func() {
				defer close(restarted)
				timeout := 5 * time.Second
				if err := n2.Stop(context.Background(), &timeout); err != nil {
					t.Errorf("stop nats-2: %v", err)
				}
				time.Sleep(3 * time.Second)
				if err := n2.Start(context.Background()); err != nil {
					t.Errorf("start nats-2: %v", err)
				}
			}()
		case 140: // the last 60 turns go out after the node is back
			<-restarted
		}
		if sent%20 == 0 {
			time.Sleep(100 * time.Millisecond) // spread the load over the outage
		}
	})
	time.Sleep(time.Second)
	completed, dups, _ := c.comp.Counts()
	t.Logf("sent 200, acknowledged %d, completed %d (distinct %d), duplicate completions %d; nats-2 stopped after 60 sends, restarted 3 s later, 60 more sent after the restart",
		acked, len(done), completed, dups)
	if acked < 150 {
		t.Fatalf("only %d of 200 turns acknowledged: the cluster did not keep serving", acked)
	}
	if len(done) != acked || dups != 0 {
		t.Fatalf("%d acknowledged turns, %d completed, %d duplicates", acked, len(done), dups)
	}
}

// TestSecurity: wrong credentials are refused, and a stage's user cannot
// publish another stage's events.
func TestSecurity(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	ep := d.endpoint(n, "4222/tcp", "")

	if nc, err := nats.Connect("nats://client:wrong@" + ep); err == nil {
		nc.Close()
		t.Fatal("wrong password accepted")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("wrong password at %s: %v", ep, err)
	}

	violations := make(chan error, 4)
	nc, err := nats.Connect("nats://envelope:aptix-dev-envelope@"+ep, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		violations <- err
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish("aptix.retrieved.conv.turn", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-violations:
		if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), "aptix.retrieved.conv.turn") {
			t.Fatalf("unexpected error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the envelope user published to the retriever's subject without a violation")
	}
	// Its own output subject is allowed.
	if err := nc.Publish("aptix.enveloped.conv.turn", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-violations:
		t.Fatalf("own subject refused: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestSecurityNkeys: the configuration `make nkeys` generates (run here
// into a temporary folder): each service connects with its own nkey; the
// development passwords, no credentials, and an unknown nkey are refused;
// the permissions are auth.conf's, including the gateway's (it publishes
// turns at their entry points and reads the API keys but cannot write
// them, nor a later stage's events) and the toolrunner's (aptix.enveloped.> and aptix.responded.>,
// not another stage's input).
func TestSecurityNkeys(t *testing.T) {
	dir := t.TempDir()
	gen := exec.Command("go", "run", "./nkeysgen", "-in", "..", "-out", dir, "-service-uid", "-1")
	gen.Dir = "../../deploy/nats/tools"
	gen.Env = append(os.Environ(), "GOWORK=off")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("nkeysgen: %v\n%s", err, out)
	}
	d := newDeployment(t)
	n := d.run("nats", "aptix/nats-server"+tag,
		testcontainers.WithCmd("-c", "/etc/nats/nkeys/single.conf"),
		testcontainers.WithEnv(map[string]string{"NATS_SERVER_NAME": "nats"}),
		testcontainers.WithFiles(
			testcontainers.ContainerFile{HostFilePath: filepath.Join(dir, "single.conf"), ContainerFilePath: "/etc/nats/nkeys/single.conf", FileMode: 0o644},
			testcontainers.ContainerFile{HostFilePath: filepath.Join(dir, "auth.conf"), ContainerFilePath: "/etc/nats/nkeys/auth.conf", FileMode: 0o644}),
		testcontainers.WithExposedPorts("4222/tcp"),
		testcontainers.WithWaitStrategy(wait.ForLog("Server is ready").WithStartupTimeout(60*time.Second)))
	ep := "nats://" + d.endpoint(n, "4222/tcp", "")

	refused := func(what string, opts ...nats.Option) {
		t.Helper()
		nc, err := nats.Connect(ep, opts...)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: accepted", what)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("no credentials")
	refused("a development password", nats.UserInfo("gateway", "aptix-dev-gateway"))
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	refused("an unknown nkey", nats.Nkey(pub, kp.Sign))

	as := func(user string) (*nats.Conn, chan error) {
		t.Helper()
		opt, err := nats.NkeyOptionFromSeed(filepath.Join(dir, user+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		violations := make(chan error, 8)
		nc, err := nats.Connect(ep, opt, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
		if err != nil {
			t.Fatalf("%s with its nkey: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc, violations
	}
	check := func(user string, nc *nats.Conn, violations chan error, subject string, allowed bool) {
		t.Helper()
		if err := nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case err := <-violations:
			if allowed {
				t.Fatalf("%s publishing %s refused: %v", user, subject, err)
			}
			if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), subject) {
				t.Fatalf("%s publishing %s: unexpected error %v", user, subject, err)
			}
		case <-time.After(time.Second):
			if !allowed {
				t.Fatalf("%s published %s without a violation", user, subject)
			}
		}
	}
	gw, gv := as("gateway")
	check("gateway", gw, gv, "aptix.requested.conv.turn", true)
	check("gateway", gw, gv, "$KV.aptix_responses.resp.x", true)
	// A turn with no retrieval enters at aptix.retrieved, a transparent
	// one that needs nothing of the envelope at aptix.enveloped
	// (layout.Entries); the later stages' subjects stay closed to the
	// gateway.
	check("gateway", gw, gv, "aptix.retrieved.conv.turn", true)
	check("gateway", gw, gv, "aptix.enveloped.conv.turn", true)
	check("gateway", gw, gv, "aptix.responded.conv.turn", false)
	check("gateway", gw, gv, "aptix.toolround.conv.turn", false)
	check("gateway", gw, gv, "$KV.aptix_keys.key.0123456789abcdef", false)
	tr, tv := as("toolrunner")
	check("toolrunner", tr, tv, "aptix.enveloped.conv.turn", true)
	check("toolrunner", tr, tv, "aptix.responded.conv.turn", true) // a round that ends the loop (client calls too)
	check("toolrunner", tr, tv, "aptix.retrieved.conv.turn", false)
	check("toolrunner", tr, tv, "aptix.requested.conv.turn", false)
	env, ev := as("envelope")
	check("envelope", env, ev, "aptix.enveloped.conv.turn", true)
	check("envelope", env, ev, "aptix.retrieved.conv.turn", false)
	for _, u := range []string{"admin", "client", "retriever", "llmcaller", "mapper"} {
		as(u)
	}
}
