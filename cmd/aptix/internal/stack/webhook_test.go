package stack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

const testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// delivery is one webhook request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an httptest webhook receiver; fail answers 500 to the first
// fail requests.
type receiver struct {
	mu   sync.Mutex
	got  []delivery
	fail int
	srv  *httptest.Server
}

func newReceiver(t *testing.T, fail int) *receiver {
	rc := &receiver{fail: fail}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: b, at: time.Now()})
		failing := len(rc.got) <= rc.fail
		rc.mu.Unlock()
		if failing {
			http.Error(w, "not now", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// waitDeliveries waits until the receiver got n requests.
func (rc *receiver) waitDeliveries(t *testing.T, n int) []delivery {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if d := rc.deliveries(); len(d) >= n {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d webhook(s), want %d", len(rc.deliveries()), n)
		}
	}
}

// verifyStandardWebhook is the Standard Webhooks reference check, written
// here from the specification, not with the gateway's code.
func verifyStandardWebhook(t *testing.T, d delivery) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(testWebhookSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	id, ts := d.header.Get("webhook-id"), d.header.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(d.body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	found := false
	for _, sig := range strings.Fields(d.header.Get("webhook-signature")) {
		found = found || hmac.Equal([]byte(sig), []byte(want))
	}
	if id == "" || ts == "" || !found {
		t.Fatalf("signature %q does not verify (id %q, timestamp %q)", d.header.Get("webhook-signature"), id, ts)
	}
}

func webhookGateway(e *env, mutate ...func(*application.WebhookConfig)) openai.Client {
	wc := &application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: 100 * time.Millisecond, Timeout: 2 * time.Second, AllowPrivate: true}
	for _, m := range mutate {
		m(wc)
	}
	_, client := e.gateway(func(c *httpapi.Config) { c.Webhooks = wc })
	return client
}

func bgWithWebhook(text, url string) responses.ResponseNewParams {
	p := bgParams(text)
	p.Metadata = shared.Metadata{"webhook_url": url}
	return p
}

// TestGatewayWebhookSigned: a completed background response's webhook is
// delivered once, signed (verified with the reference algorithm), with the
// seed's headers and payload; a cancelled one sends response.cancelled.
func TestGatewayWebhookSigned(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 1500 * time.Millisecond}, slowProfile)
	rc := newReceiver(t, 0)
	client := webhookGateway(e)
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgWithWebhook("Explain the retry policy", rc.srv.URL+"/hook"))
	if err != nil {
		t.Fatal(err)
	}
	d := rc.waitDeliveries(t, 1)[0]
	verifyStandardWebhook(t, d)
	if d.header.Get("X-Aptix-Event") != "response.completed" || d.header.Get("X-Aptix-Response-ID") != r.ID ||
		!strings.HasPrefix(d.header.Get("User-Agent"), "aptix/") || d.header.Get("Content-Type") != "application/json" {
		t.Fatalf("webhook headers %v", d.header)
	}
	var p struct {
		ID, Event, Status string
		Output            []json.RawMessage
		Metadata          map[string]string
		CompletedAt       *int64 `json:"completed_at"`
	}
	if err := json.Unmarshal(d.body, &p); err != nil || p.ID != r.ID || p.Event != "response.completed" || p.Status != "completed" ||
		len(p.Output) == 0 || p.CompletedAt == nil || p.Metadata["webhook_url"] == "" {
		t.Fatalf("webhook payload %s (%v)", d.body, err)
	}

	c, err := client.Responses.New(ctx, bgWithWebhook("Cancel me", rc.srv.URL+"/hook"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	d = rc.waitDeliveries(t, 2)[1]
	verifyStandardWebhook(t, d)
	if d.header.Get("X-Aptix-Event") != "response.cancelled" || d.header.Get("X-Aptix-Response-ID") != c.ID {
		t.Fatalf("cancel webhook headers %v: %s", d.header, d.body)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.deliveries()); n != 2 {
		t.Fatalf("%d webhooks for 2 events: each must be delivered once", n)
	}
}

// TestGatewayWebhookRetried: a receiver that fails twice gets a third
// attempt, which succeeds: 3 attempts, the same webhook-id each time.
func TestGatewayWebhookRetried(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 2)
	client := webhookGateway(e)
	r, err := client.Responses.New(ctxT(t), bgWithWebhook("Retry me", rc.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	ds := rc.waitDeliveries(t, 3)
	for _, d := range ds {
		verifyStandardWebhook(t, d)
		if d.header.Get("webhook-id") != ds[0].header.Get("webhook-id") {
			t.Fatalf("webhook-id changed between attempts: %q, %q", ds[0].header.Get("webhook-id"), d.header.Get("webhook-id"))
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(rc.deliveries()); n != 3 {
		t.Fatalf("%d attempts, want 3 (2 failures, 1 success)", n)
	}
	g, err := client.Responses.Get(ctxT(t), r.ID, responses.ResponseGetParams{})
	if err != nil || !strings.Contains(g.RawJSON(), `"webhook":{"status":"delivered","event":"response.completed","attempts":3}`) {
		t.Fatalf("the response does not show its webhook delivered after 3 attempts: %v %s", err, g.RawJSON())
	}
}

// TestGatewayWebhookRefusedPrivate: without AllowPrivate a loopback
// receiver is refused at send time: nothing is sent, the delivery is
// dead-lettered with the reason, and the response's own status is not
// affected.
func TestGatewayWebhookRefusedPrivate(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 0)
	client := webhookGateway(e, func(c *application.WebhookConfig) { c.AllowPrivate = false })
	ctx := ctxT(t)
	r, err := client.Responses.New(ctx, bgWithWebhook("Tell a private address", rc.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, client, r.ID, "completed")
	s, err := e.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m, err := s.GetLastMsgForSubject(ctx, contracts.DeadSubject("webhook")); err == nil {
			reason = m.Header.Get(contracts.HeaderDeadReason)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter for the refused webhook")
		}
	}
	if !strings.Contains(reason, "loopback or private") {
		t.Fatalf("dead letter reason %q", reason)
	}
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("a refused receiver got %d request(s)", n)
	}
	g, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || g.Status != responses.ResponseStatusCompleted || !strings.Contains(g.RawJSON(), `"webhook":{"status":"failed"`) {
		t.Fatalf("the response does not show its webhook failed (or its own status changed): %v %s", err, g.RawJSON())
	}
}

// TestGatewayWebhookSurvivesRestart: a receiver that is down (500) while
// the first gateway runs gets the webhook from the second gateway after a
// restart: the pending delivery lives in the durable consumer, not in a
// process.
func TestGatewayWebhookSurvivesRestart(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 1)
	cfg := application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: 1500 * time.Millisecond, Timeout: 2 * time.Second, AllowPrivate: true, MaxAttempts: 5}
	first, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(first)
	t.Cleanup(hs.Close)
	client := openai.NewClient(optionBase(hs.URL))
	if _, err := client.Responses.New(ctxT(t), bgWithWebhook("Deliver me later", rc.srv.URL)); err != nil {
		t.Fatal(err)
	}
	rc.waitDeliveries(t, 1) // failed
	first.Close()           // the gateway goes away with the retry pending
	second, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	ds := rc.waitDeliveries(t, 2)
	verifyStandardWebhook(t, ds[1])
	if ds[1].header.Get("webhook-id") != ds[0].header.Get("webhook-id") {
		t.Fatal("the redelivery is not the same webhook")
	}
}

// TestGatewayWebhookRetryAfterGracefulStop: a delivery whose attempt
// failed is handed back by a gateway that stops (on its own connection,
// closed after it, as `aptix up` does) for the rest of its retry delay, and
// the next gateway re-attempts it then: not after the ack wait (30 s), as
// when the hand-back reached the stopping subscription and was lost.
func TestGatewayWebhookRetryAfterGracefulStop(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	rc := newReceiver(t, 1)
	const retry = time.Second
	cfg := application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: retry, Timeout: 2 * time.Second, AllowPrivate: true, MaxAttempts: 5}
	nc, _ := natstest.Connect(t, e.url)
	first, err := buildGateway(nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(first)
	t.Cleanup(hs.Close)
	client := openai.NewClient(optionBase(hs.URL))
	if _, err := client.Responses.New(ctxT(t), bgWithWebhook("Deliver me after the restart", rc.srv.URL)); err != nil {
		t.Fatal(err)
	}
	failed := rc.waitDeliveries(t, 1)[0].at
	first.Close() // SIGTERM during the retry delay
	nc.Close()
	restarted := time.Now()
	second, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	ds := rc.waitDeliveries(t, 2)
	if wait := ds[1].at.Sub(failed); wait < retry-100*time.Millisecond {
		t.Fatalf("re-attempted %s after the failed attempt, before its retry delay %s", wait, retry)
	}
	if late := ds[1].at.Sub(restarted); late > retry+3*time.Second {
		t.Fatalf("re-attempted %s after the restart, want about the retry delay %s", late, retry)
	}
}

func optionBase(url string) option.RequestOption { return option.WithBaseURL(url + "/v1") }

// TestGatewayWebhookSlowReceiverBlocksNoOne: a receiver that hangs on every
// webhook it is sent (20 of them, each attempt timing out after 2 s) does
// not delay another receiver's: the healthy one gets all 5 of its webhooks
// within seconds. Delivery was serial: the healthy receiver waited behind
// every timed-out attempt (minutes).
func TestGatewayWebhookSlowReceiverBlocksNoOne(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	release := make(chan struct{})
	var hung atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	healthy := newReceiver(t, 0)
	client := webhookGateway(e, func(c *application.WebhookConfig) { c.MaxAttempts, c.PerDestination = 3, 2 })
	ctx := ctxT(t)
	for i := range 20 {
		if _, err := client.Responses.New(ctx, bgWithWebhook(fmt.Sprintf("slow receiver %d", i), slow.URL+"/hook")); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); hung.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hanging receiver got no webhook")
		}
	}
	start := time.Now()
	for i := range 5 {
		if _, err := client.Responses.New(ctx, bgWithWebhook(fmt.Sprintf("healthy receiver %d", i), healthy.srv.URL+"/hook")); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(8 * time.Second); len(healthy.deliveries()) < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the healthy receiver got %d of 5 webhooks in 8 s while another receiver hung (%d requests held there)", len(healthy.deliveries()), hung.Load())
		}
	}
	t.Logf("healthy receiver: 5 webhooks in %s; the hanging one holds %d request(s) (at most 2 at once)", time.Since(start).Round(time.Millisecond), hung.Load())
	for _, d := range healthy.deliveries() {
		verifyStandardWebhook(t, d)
	}
}

// TestGatewayWebhookPendingOutlivesTrim: a webhook still pending (its
// receiver failed once, and the gateway went away before the retry) is
// delivered by the next gateway although history is trimmed to 1 KiB every
// 200 ms and its completion is past its grace (1 s): the trimmer keeps
// completions the webhook consumer has not acknowledged.
// The completion was purged under the pending delivery, which was then
// never sent.
func TestGatewayWebhookPendingOutlivesTrim(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Stream = layout.StreamConfig{HistoryMaxBytes: 1 << 10, CompletionGrace: time.Second, TrimEvery: 200 * time.Millisecond}
	})
	rc := newReceiver(t, 1)
	cfg := application.WebhookConfig{Secret: testWebhookSecret, RetryDelay: 5 * time.Second, Timeout: 2 * time.Second, AllowPrivate: true, MaxAttempts: 5}
	first, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(first)
	t.Cleanup(hs.Close)
	client := openai.NewClient(optionBase(hs.URL))
	if _, err := client.Responses.New(ctxT(t), bgWithWebhook("Deliver me after the trim", rc.srv.URL)); err != nil {
		t.Fatal(err)
	}
	rc.waitDeliveries(t, 1) // failed
	first.Close()
	// Let the trimmer run well past the grace.
	time.Sleep(3 * time.Second)
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(context.Background(), "aptix.retrieved.>"); err == nil {
		t.Fatal("the trimmer did not run: history beyond its size is still there")
	}
	second, err := buildGateway(e.nc, e.cfg.Profiles, func(c *httpapi.Config) { c.Webhooks = &cfg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	ds := rc.waitDeliveries(t, 2)
	verifyStandardWebhook(t, ds[1])
	if ds[1].header.Get("webhook-id") != ds[0].header.Get("webhook-id") || !strings.Contains(string(ds[1].body), `"status":"completed"`) {
		t.Fatalf("the pending webhook was not delivered as it was first sent: %s", ds[1].body)
	}
}
