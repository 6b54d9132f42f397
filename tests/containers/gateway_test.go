//go:build containers

package containers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// gateway starts one replica of the HTTP gateway as the gateway user and
// returns its host-side base URL.
func (d *deployment) gateway(name string, nodes []string) (*testcontainers.DockerContainer, string) {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = fmt.Sprintf("nats://gateway:aptix-dev-gateway@%s:4222", n)
	}
	c := d.run(name, "aptix/gateway"+tag,
		// A gateway listening beyond loopback needs APTIX_AUTH; these tests
		// are about the bus, so it is told none explicitly.
		testcontainers.WithEnv(map[string]string{"APTIX_NATS_URL": strings.Join(urls, ","), "APTIX_SANDBOX_URL": "http://sandbox:8089/v1", "APTIX_AUTH": "none"}),
		testcontainers.WithExposedPorts("8080/tcp"),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/readyz").WithPort("8080/tcp").WithStartupTimeout(120*time.Second)))
	return c, "http://" + d.endpoint(c, "8080", "")
}

// TestGatewayReplicaKilledMidRequest: the gateway behind a load balancer with
// stateless replicas: a gateway replica SIGKILLed while its client streams
// a response does not lose the turn: it completes, and GET on the other
// replica returns it.
func TestGatewayReplicaKilledMidRequest(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	d.sandbox(2 * time.Second)
	d.pipelineStages(single, 1, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})
	g1, url1 := d.gateway("gateway-1", single)
	_, url2 := d.gateway("gateway-2", single)

	resp, err := http.Post(url1+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"sandbox-1","input":"Survive the gateway crash","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create on gateway-1: %d %s", resp.StatusCode, b)
	}
	var id string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && id == "" {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev struct {
				Type     string
				Response struct{ ID string }
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != "response.created" {
				t.Fatalf("first event %s (%v)", data, err)
			}
			id = ev.Response.ID
		}
	}
	sigkill(t, g1)
	t.Logf("gateway-1 killed with %s in flight", id)

	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := http.Get(url2 + "/v1/responses/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status string
			Output []struct {
				Content []struct{ Text string }
			}
		}
		err = json.NewDecoder(r.Body).Decode(&got)
		r.Body.Close()
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("GET on gateway-2: %d %v", r.StatusCode, err)
		}
		if got.Status == "completed" {
			if len(got.Output) != 1 || !strings.Contains(got.Output[0].Content[0].Text, "Survive the gateway crash") {
				t.Fatalf("output %+v", got.Output)
			}
			t.Logf("%s completed; read from gateway-2", id)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 60s", got.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
