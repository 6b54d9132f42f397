//go:build containers

package containers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBackgroundSurvivesKills: 100 background responses created
// on gateway-1, the sandbox answering after 2 s; with calls in flight the
// LLM caller and gateway-1 are SIGKILLed (the LLM caller restarted 1 s
// later, gateway-1 left dead). Every response reaches a terminal status,
// read from gateway-2, each turn completes exactly once on the bus, and the
// upstream calls are counted at the sandbox.
func TestBackgroundSurvivesKills(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	sb := d.sandbox(2 * time.Second)
	stages := d.pipelineStages(single, 1, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})
	g1, url1 := d.gateway("gateway-1", single)
	_, url2 := d.gateway("gateway-2", single)

	const responses = 100
	ids := make([]string, responses)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range responses {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			body := fmt.Sprintf(`{"model":"sandbox-1","input":"bg-%03d","background":true,"store":true}`, i)
			resp, err := http.Post(url1+"/v1/responses", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var r struct{ ID, Status string }
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.Status != "queued" {
				t.Errorf("create %d: %d %+v %v", i, resp.StatusCode, r, err)
				return
			}
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Kill once calls are in flight and some responses are done.
	deadline := time.Now().Add(time.Minute)
	for {
		done, _, _ := c.comp.Counts()
		calls, _ := d.upstreamCallsErr(sb)
		if done >= 5 && total(calls)-done >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	before, _, _ := c.comp.Counts()
	llm := stages["llmcaller"][0]
	sigkill(t, llm)
	sigkill(t, g1)
	time.Sleep(time.Second)
	if err := llm.Start(d.ctx); err != nil {
		t.Fatalf("restart llmcaller: %v", err)
	}

	statuses := map[string]int{}
	end := time.Now().Add(3 * time.Minute)
	for i, id := range ids {
		for {
			r, err := http.Get(url2 + "/v1/responses/" + id)
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Status string }
			err = json.NewDecoder(r.Body).Decode(&got)
			r.Body.Close()
			if err != nil || r.StatusCode != 200 {
				t.Fatalf("GET %s on gateway-2: %d %v", id, r.StatusCode, err)
			}
			if got.Status == "completed" || got.Status == "failed" || got.Status == "incomplete" || got.Status == "cancelled" {
				statuses[got.Status]++
				break
			}
			if time.Now().After(end) {
				t.Fatalf("response %d (%s) still %s after 3 minutes", i, id, got.Status)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	time.Sleep(time.Second)
	distinct, dups, _ := c.comp.Counts()
	calls := d.upstreamCalls(sb)
	twice := 0
	for i := range responses {
		if calls[fmt.Sprintf("bg-%03d", i)] > 1 {
			twice++
		}
	}
	t.Logf("SIGKILL llmcaller and gateway-1 after %d of %d background responses completed; terminal statuses %v (read from gateway-2); completions on the bus %d distinct, %d duplicates; upstream creates %d, turns created more than once %d",
		before, responses, statuses, distinct, dups, total(calls), twice)
	if statuses["completed"] != responses || distinct != responses || dups != 0 {
		t.Fatal("not every background response completed exactly once")
	}
	if before >= responses {
		t.Fatal("the kill came after the load was over")
	}
}
