package history

import (
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestRetryMsgDropsPublishDirectives: a dead letter stored before the
// stages dropped the consumed event's JetStream directives still carries
// them; the retry publishes the event as its stage would, without them.
func TestRetryMsgDropsPublishDirectives(t *testing.T) {
	h := map[string][]string{
		"Nats-Expected-Last-Subject-Sequence": {"0"}, "Nats-Msg-Id": {"t1.retrieved"}, "Nats-Rollup": {"sub"},
		contracts.HeaderClaim: {"claim-key"}, contracts.HeaderTraceparent: {"00-1-2-01"},
		contracts.HeaderDeadReason: {"gave up"}, contracts.HeaderDeadStage: {"envelope"},
	}
	m, err := RetryMsg(toDead(7, time.Now(), contracts.DeadSubject("envelope"), h, []byte(`{}`)))
	if err == nil {
		t.Fatal("a dead letter without its original subject was accepted")
	}
	h[contracts.HeaderDeadSubject] = []string{"aptix.retrieved.c1.t1"}
	if m, err = RetryMsg(toDead(7, time.Now(), contracts.DeadSubject("envelope"), h, []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Nats-Msg-Id": "c1.t1.retrieved.redrive-7", contracts.HeaderRedrive: "7",
		contracts.HeaderClaim: "claim-key", contracts.HeaderTraceparent: "00-1-2-01",
	}
	if len(m.Header) != len(want) {
		t.Fatalf("headers %v, want %v", m.Header, want)
	}
	for k, v := range want {
		if m.Header.Get(k) != v {
			t.Fatalf("%s = %q, want %q (headers %v)", k, m.Header.Get(k), v, m.Header)
		}
	}
}
