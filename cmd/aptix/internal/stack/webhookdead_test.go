package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestWebhookDeadLetterListedCountedRetried: a webhook that exhausted its
// attempts is a dead letter like a stage's: listed under stage "webhook"
// (`aptix dead ls --stage webhook`, which exited 2) with the completion's
// subject and its attempts, counted per source (the console counted 0
// while listing it), and `aptix dead retry` re-drives it: the webhook is
// delivered afresh (the retry was refused, the letter had no subject).
func TestWebhookDeadLetterListedCountedRetried(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 1000)
	client := webhookGateway(e, func(c *application.WebhookConfig) { c.MaxAttempts = 2 })
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgWithWebhook("Tell a receiver that is down", rc.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var letters []history.DeadLetter
	for deadline := time.Now().Add(15 * time.Second); len(letters) == 0; time.Sleep(20 * time.Millisecond) {
		if letters, err = history.DeadLetters(ctx, e.js, history.DeadWebhook); err != nil {
			t.Fatalf("dead letters of stage webhook: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no webhook dead letter")
		}
	}
	d := letters[0]
	if len(letters) != 1 || d.FromStage != history.DeadWebhook || !strings.HasPrefix(d.Original, contracts.SubjectPrefix+"."+contracts.StageCompleted+".") ||
		d.Deliveries != 2 || d.Turn == "" {
		t.Fatalf("dead letter: stage %q, subject %q, deliveries %d, turn %q (%d letters)", d.FromStage, d.Original, d.Deliveries, d.Turn, len(letters))
	}
	counts, err := history.DeadCounts(ctx, e.js)
	if err != nil || counts[history.DeadWebhook] != 1 {
		t.Fatalf("dead counts %v (%v)", counts, err)
	}
	sent := len(rc.deliveries())
	rc.mu.Lock()
	rc.fail = 0 // the receiver is back
	rc.mu.Unlock()
	if ok, err := history.Retry(ctx, e.js, d); !ok || err != nil {
		t.Fatalf("retry: %v %v", ok, err)
	}
	rc.waitDeliveries(t, sent+1)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err == nil && strings.Contains(g.RawJSON(), `"webhook":{"status":"delivered"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the retry the webhook is not delivered: %v %s", err, g.RawJSON())
		}
	}
	if left, _ := history.DeadLetters(ctx, e.js, history.DeadWebhook); len(left) != 0 {
		t.Fatalf("%d dead letter(s) left after the retry", len(left))
	}
}
