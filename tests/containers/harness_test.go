//go:build containers

package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/aptix-dev/aptix/pkg/contracts"
	pipelineclient "github.com/aptix-dev/aptix/pkg/pipeline/client"
)

// Every container and network carries this label, so `make
// clean-containers` removes whatever a killed run left (there is no Ryuk
// reaper: it would have to be pulled from a registry).
var labels = map[string]string{"org.aptix.test": "1", "org.aptix.project": "aptix"}

const tag = ":dev" // built by `make images`

func TestMain(m *testing.M) {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// The engine here runs on this host; testcontainers' guess of the
	// daemon's address (from the default gateway) is not reachable.
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	if out, err := exec.Command("docker", "image", "inspect", "aptix/nats-server"+tag).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("containers suite: Docker or the aptix images are not available (%v: %s); run `make test-containers`", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL:", msg) // never a silent skip in CI
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "SKIP:", msg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// deployment is one test's set of containers on its own network.
type deployment struct {
	t   *testing.T
	ctx context.Context
	nw  *testcontainers.DockerNetwork
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	ctx := context.Background()
	nw, err := network.New(ctx, network.WithLabels(labels))
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })
	return &deployment{t: t, ctx: ctx, nw: nw}
}

func (d *deployment) run(name, image string, opts ...testcontainers.ContainerCustomizer) *testcontainers.DockerContainer {
	d.t.Helper()
	all := append([]testcontainers.ContainerCustomizer{
		network.WithNetwork([]string{name}, d.nw), testcontainers.WithLabels(labels),
	}, opts...)
	c, err := testcontainers.Run(d.ctx, image, all...)
	if err != nil {
		if c != nil {
			logs(d.t, c)
		}
		d.t.Fatalf("container %s: %v", name, err)
	}
	d.t.Cleanup(func() {
		if d.t.Failed() {
			logs(d.t, c)
		}
		_ = c.Terminate(context.Background())
	})
	return c
}

func logs(t *testing.T, c *testcontainers.DockerContainer) {
	r, err := c.Logs(context.Background())
	if err != nil {
		return
	}
	b, _ := io.ReadAll(r)
	s := string(b)
	if len(s) > 3000 {
		s = "…" + s[len(s)-3000:]
	}
	t.Logf("logs of %s:\n%s", c.GetContainerID()[:12], s)
}

// natsNode starts nats-server with the single-node config, or as node name
// of the three-node cluster when cluster is true.
func (d *deployment) natsNode(name string, cluster bool) *testcontainers.DockerContainer {
	cmd := []string{"-c", "/etc/nats/single.conf"}
	if cluster {
		cmd = []string{"-c", "/etc/nats/cluster.conf"}
	}
	return d.run(name, "aptix/nats-server"+tag,
		testcontainers.WithCmd(cmd...),
		testcontainers.WithEnv(map[string]string{"NATS_SERVER_NAME": name}),
		testcontainers.WithExposedPorts("4222/tcp"),
		testcontainers.WithWaitStrategy(wait.ForLog("Server is ready").WithStartupTimeout(60*time.Second)))
}

// sandbox starts the sandbox model with the given latency; its stats port is exposed.
func (d *deployment) sandbox(latency time.Duration) *testcontainers.DockerContainer {
	return d.run("sandbox", "aptix/aptix"+tag,
		testcontainers.WithCmd("sandbox", "--addr", "0.0.0.0:8089", "--latency", latency.String()),
		testcontainers.WithExposedPorts("8089/tcp"),
		testcontainers.WithWaitStrategy(wait.ForLog("listening on").WithStartupTimeout(30*time.Second)))
}

// stage starts one replica of a stage, connecting as the stage's own user
// to every given NATS node.
func (d *deployment) stage(stage, name string, nodes []string, extra map[string]string) *testcontainers.DockerContainer {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = fmt.Sprintf("nats://%s:aptix-dev-%s@%s:4222", stage, stage, n)
	}
	env := map[string]string{
		"APTIX_NATS_URL":    strings.Join(urls, ","),
		"APTIX_SANDBOX_URL": "http://sandbox:8089/v1",
		"APTIX_DATA_DIR":    "/data",
		"APTIX_ACK_WAIT":    "4s",
	}
	for k, v := range extra {
		env[k] = v
	}
	return d.run(name, "aptix/"+stage+tag,
		testcontainers.WithEnv(env),
		testcontainers.WithTmpfs(map[string]string{"/data": "rw,mode=1777"}),
		testcontainers.WithWaitStrategy(wait.ForLog(`"msg":"starting"`).WithStartupTimeout(150*time.Second)))
}

// pipelineStages starts one replica of each stage (llmcallers of them for the LLM stage).
func (d *deployment) pipelineStages(nodes []string, llmcallers int, extra map[string]string) map[string][]*testcontainers.DockerContainer {
	out := map[string][]*testcontainers.DockerContainer{}
	for _, st := range []string{"retriever", "envelope", "llmcaller", "mapper", "toolrunner"} {
		n := 1
		if st == "llmcaller" {
			n = llmcallers
		}
		for i := range n {
			out[st] = append(out[st], d.stage(st, fmt.Sprintf("%s-%d", st, i+1), nodes, extra))
		}
	}
	return out
}

// endpoint is the host-side address of a container port.
func (d *deployment) endpoint(c *testcontainers.DockerContainer, port, scheme string) string {
	d.t.Helper()
	ep, err := c.PortEndpoint(d.ctx, port, scheme)
	if err != nil {
		d.t.Fatal(err)
	}
	return ep
}

// client connects to the given nodes as the "client" user.
type client struct {
	t    *testing.T
	nc   *nats.Conn
	js   jetstream.JetStream
	comp *pipelineclient.Completions
}

func (d *deployment) client(nodes ...*testcontainers.DockerContainer) *client {
	d.t.Helper()
	var urls []string
	for _, n := range nodes {
		ep := d.endpoint(n, "4222/tcp", "")
		urls = append(urls, "nats://client:aptix-dev-client@"+ep)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		d.t.Fatalf("client connect to %v: %v", urls, err)
	}
	d.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		d.t.Fatal(err)
	}
	c := &client{t: d.t, nc: nc, js: js}
	// Stages create the stream at start; wait for it, then follow completions.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
		_, err := js.Stream(ctx, contracts.StreamName)
		if err == nil {
			c.comp, err = pipelineclient.WatchCompletions(ctx, js, "*")
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("stream %s not available: %v", contracts.StreamName, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	d.t.Cleanup(c.comp.Stop)
	return c
}

// waitStages waits until every stage answers its micro service ping with
// the expected number of instances.
func (c *client) waitStages(want map[string]int) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for st, n := range want {
		for len(c.collect("$SRV.PING.aptix-"+st, 500*time.Millisecond)) < n {
			if time.Now().After(deadline) {
				c.t.Fatalf("stage %s: fewer than %d instances answer", st, n)
			}
		}
	}
}

// collect sends a request and gathers every reply that arrives within wait:
// a micro service answers once per instance.
func (c *client) collect(subject string, wait time.Duration) [][]byte {
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		c.t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(subject, inbox, nil); err != nil {
		c.t.Fatal(err)
	}
	var out [][]byte
	timer := time.After(wait)
	for {
		select {
		case m := <-ch:
			out = append(out, m.Data)
		case <-timer:
			return out
		}
	}
}

// processed returns each instance's processed count of a stage.
func (c *client) processed(stage string) []int64 {
	var out []int64
	for _, raw := range c.collect("$SRV.STATS.aptix-"+stage, time.Second) {
		var st struct {
			Endpoints []struct {
				Data map[string]int64 `json:"data"`
			} `json:"endpoints"`
		}
		if json.Unmarshal(raw, &st) == nil && len(st.Endpoints) > 0 {
			out = append(out, st.Endpoints[0].Data["processed"])
		}
	}
	return out
}

// submit publishes a turn, retrying while the cluster elects a leader. It
// returns whether JetStream acknowledged (stored) the turn.
func (c *client) submit(req contracts.AgentExecuteRequest, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := pipelineclient.Submit(ctx, c.js, req)
		cancel()
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			c.t.Logf("turn %s not acknowledged: %v", req.TurnId, err)
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *client) wait(conv, turnID string, within time.Duration) (contracts.Turn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.comp.Wait(ctx, conv, turnID)
}

// sendAll submits the turns with the given concurrency and waits for every
// acknowledged one; it returns the completions by turn id and the number acknowledged.
func (c *client) sendAll(reqs []contracts.AgentExecuteRequest, concurrency int, within time.Duration, during func(sent int)) (map[string]contracts.Turn, int) {
	var (
		mu    sync.Mutex
		done  = map[string]contracts.Turn{}
		acked int
		wg    sync.WaitGroup
		sem   = make(chan struct{}, concurrency)
	)
	for i, r := range reqs {
		if during != nil {
			during(i)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !c.submit(r, 30*time.Second) {
				return
			}
			mu.Lock()
			acked++
			mu.Unlock()
			t, err := c.wait(r.ConversationId, r.TurnId, within)
			if err != nil {
				c.t.Errorf("turn %s: %v", r.TurnId, err)
				return
			}
			mu.Lock()
			done[r.TurnId] = t
			mu.Unlock()
		}()
	}
	wg.Wait()
	return done, acked
}

// upstreamCalls reads the sandbox's per-instruction request counts.
func (d *deployment) upstreamCalls(sb *testcontainers.DockerContainer) map[string]int {
	d.t.Helper()
	m, err := d.upstreamCallsErr(sb)
	if err != nil {
		d.t.Fatal(err)
	}
	return m
}

// upstreamCallsErr is upstreamCalls for goroutines, which must not Fatal.
func (d *deployment) upstreamCallsErr(sb *testcontainers.DockerContainer) (map[string]int, error) {
	ep, err := sb.PortEndpoint(d.ctx, "8089/tcp", "")
	if err != nil {
		return nil, err
	}
	resp, err := http.Get("http://" + ep + "/v1/_sandbox/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		ByInstruction map[string]int `json:"byInstruction"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("sandbox stats: %w", err)
	}
	return st.ByInstruction, nil
}

func turns(prefix string, n int) []contracts.AgentExecuteRequest {
	out := make([]contracts.AgentExecuteRequest, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = contracts.AgentExecuteRequest{ConversationId: "c-" + id, TurnId: id, Mode: "LOAD",
			Instruction: "Instruction of turn " + id, RagScope: contracts.RagScopeNone}
	}
	return out
}

func sigkill(t *testing.T, c *testcontainers.DockerContainer) {
	t.Helper()
	if out, err := exec.Command("docker", "kill", "--signal", "KILL", c.GetContainerID()).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v: %s", err, out)
	}
}
