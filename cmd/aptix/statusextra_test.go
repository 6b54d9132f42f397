package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestStatusReplicasAndDead: every stage shows its one replica; after two
// turns dead-lettered by the retriever, its row shows 2 dead letters and
// the other stages none.
func TestStatusReplicasAndDead(t *testing.T) {
	d := newDebugStack(t)
	d.indexDown.Store(true)
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-s", TurnId: "s1", Instruction: "one"})
	d.turn(contracts.AgentExecuteRequest{ConversationId: "c-s", TurnId: "s2", Instruction: "two"})
	var out bytes.Buffer
	if err := printStatus(d.ctx(), &out, d.js, layout.StreamConfig{}.Limits()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		`retriever\s+1\s+aptix\.requested\.>\s+0\s+0\s+\d+\s+2\n`,
		`envelope\s+1\s+aptix\.retrieved\.>\s+0\s+0\s+0\s+0\n`,
		`mapper\s+1\s+aptix\.responded\.>\s+0\s+0\s+0\s+0\n`,
	} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Errorf("status lacks %s:\n%s", want, s)
		}
	}
	replicas, err := pipeline.MicroReplicas(d.js.Conn(), 300*time.Millisecond, 0)
	if err != nil || replicas["aptix-llmcaller"] != 1 || replicas["aptix-toolrunner"] != 1 || len(replicas) != 5 {
		t.Fatalf("replicas %v %v", replicas, err)
	}
}
