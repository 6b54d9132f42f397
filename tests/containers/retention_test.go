//go:build containers

package containers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	pipelineclient "github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestUpgradeFromSingleStream: a deployment on the single-stream
// layout (APTIX holding requests too, discard old) has 60 turns waiting when
// the new stage images start on it. They migrate the stream and every
// waiting turn completes exactly once; turns sent after the upgrade too.
func TestUpgradeFromSingleStream(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	d.sandbox(0)

	admin, err := nats.Connect("nats://admin:aptix-dev-admin@" + d.endpoint(n, "4222/tcp", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
	defer cancel()
	// The single-stream layout earlier deployments ran (deploy/nats/jetstream/r1 then).
	old, err := ajs.CreateStream(ctx, jetstream.StreamConfig{
		Name: contracts.StreamName, Subjects: []string{"aptix.requested.>", "aptix.retrieved.>", "aptix.enveloped.>", "aptix.responded.>", "aptix.completed.>", "aptix.dead.>"},
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30,
		Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range layout.Stages {
		if _, err := old.CreateOrUpdateConsumer(ctx, pipeline.ConsumerConfig(st.Name, st.In, pipeline.SubscriberConfig{AckWait: 4 * time.Second})); err != nil {
			t.Fatal(err)
		}
	}
	before := turns("up-old", 60)
	for _, r := range before {
		if err := pipelineclient.Submit(ctx, ajs, r); err != nil {
			t.Fatalf("publish on the old layout: %v", err)
		}
	}
	if info, _ := old.Info(ctx); info.State.Msgs != 60 {
		t.Fatalf("old layout holds %d requests, want 60", info.State.Msgs)
	}

	d.pipelineStages(single, 1, nil)
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})
	// The stages may finish a waiting turn before the client's completion
	// watch (which delivers new completions only) starts: read each from
	// the stream instead, and count its completions there.
	var got []string
	waitUntil := time.Now().Add(2 * time.Minute)
	aptix, err := c.js.Stream(d.ctx, contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, r := range before {
		wctx, wcancel := context.WithTimeout(d.ctx, max(time.Until(waitUntil), time.Second))
		turn, err := pipelineclient.Await(wctx, c.js, r.ConversationId, r.TurnId)
		wcancel()
		if err != nil {
			t.Errorf("turn %s sent before the upgrade: %v", r.TurnId, err)
			continue
		}
		got = append(got, turn.TurnId)
		subj := contracts.Subject(contracts.StageCompleted, r.ConversationId, r.TurnId)
		if info, err := aptix.Info(d.ctx, jetstream.WithSubjectFilter(subj)); err == nil {
			stored += int(info.State.Subjects[subj])
		}
	}
	after, acked := c.sendAll(turns("up-new", 20), 8, time.Minute, nil)
	time.Sleep(time.Second)
	_, dups, _ := c.comp.Counts()
	t.Logf("before the upgrade: 60 waiting, %d completed (%d completions stored); after: %d acknowledged, %d completed, duplicates %d",
		len(got), stored, acked, len(after), dups)
	if len(got) != 60 || stored != 60 || acked != 20 || len(after) != 20 || dups != 0 {
		t.Fatal("a turn was lost or completed twice across the upgrade")
	}
	if _, err := ajs.Consumer(ctx, contracts.StreamName, layout.Durable("retriever")); err == nil {
		t.Fatal("the old retriever consumer is still on APTIX after the migration")
	}
}

// TestTinyCapacityBackpressure: stages configured with a tiny
// work capacity, the model answering after 2 s, far more turns offered than
// fit: every publish is acknowledged or refused with ErrAtCapacity, every
// acknowledged turn completes exactly once, nothing is lost.
func TestTinyCapacityBackpressure(t *testing.T) {
	d := newDeployment(t)
	n := d.natsNode("nats", false)
	d.sandbox(2 * time.Second)
	d.pipelineStages(single, 1, map[string]string{
		"APTIX_QUEUE_MAX_BYTES": "16KiB", "APTIX_WORK_MAX_BYTES": "256KiB", "APTIX_HISTORY_MAX_BYTES": "64KiB",
		"APTIX_COMPLETION_GRACE": "1s",
	})
	c := d.client(n)
	c.waitStages(map[string]int{"retriever": 1, "envelope": 1, "llmcaller": 1, "mapper": 1})
	const offered = 400
	var (
		mu       sync.Mutex
		accepted []string
		refused  int
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 32)
	)
	for i := range offered {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("cap-%03d", i)
			ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
			defer cancel()
			err := pipelineclient.Submit(ctx, c.js, contracts.AgentExecuteRequest{ConversationId: "cap", TurnId: id, Instruction: "turn " + id, RagScope: contracts.RagScopeNone})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, id)
			case backpressure.IsAtCapacity(err):
				refused++
			default:
				t.Errorf("turn %s refused without saying why capacity: %v", id, err)
			}
		}()
	}
	wg.Wait()
	lost := 0
	waitUntil := time.Now().Add(3 * time.Minute)
	for _, id := range accepted {
		if _, err := c.wait("cap", id, max(time.Until(waitUntil), time.Second)); err != nil {
			lost++
		}
	}
	time.Sleep(time.Second)
	_, dups, _ := c.comp.Counts()
	t.Logf("offered %d, acknowledged %d, refused %d, completed %d, lost %d, duplicates %d", offered, len(accepted), refused, len(accepted)-lost, lost, dups)
	if refused == 0 || lost != 0 || dups != 0 || len(accepted)+refused != offered {
		t.Fatal("backpressure lost or duplicated turns, or never refused one")
	}
}
