package console

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestOverviewCountsWebhookDeadLetters: the overview's dead-letter card
// counts the gateway's webhook dead letters with the stages' (it showed 0
// while the list it links to showed one), and the list takes
// ?stage=webhook.
func TestOverviewCountsWebhookDeadLetters(t *testing.T) {
	e := newEnv(t)
	m := nats.NewMsg(contracts.DeadSubject("webhook"))
	m.Data = []byte(`{}`)
	m.Header.Set(contracts.HeaderDeadReason, "receiver down")
	m.Header.Set(contracts.HeaderDeadStage, "webhook")
	m.Header.Set(contracts.HeaderDeadSubject, contracts.Subject(contracts.StageCompleted, "c-hook", "t-hook"))
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	c := e.server()
	if r := c.get("/console/"); r.status != 200 || !strings.Contains(r.body, `<a href="/console/dead">1</a>`) {
		t.Fatalf("overview %d: the dead-letter card does not count the webhook's:\n%s", r.status, r.body)
	}
	if r := c.get("/console/dead?stage=webhook"); r.status != 200 || !strings.Contains(r.body, "receiver down") || !strings.Contains(r.body, "webhook (1)") {
		t.Fatalf("/console/dead?stage=webhook: %d\n%s", r.status, r.body)
	}
}
