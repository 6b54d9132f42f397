package application

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// WebhookConfig configures webhook delivery. A nil
// Config.Webhooks sends none.
type WebhookConfig struct {
	// Secret signs every delivery (Standard Webhooks, "whsec_<base64>");
	// empty sends them unsigned.
	Secret string
	// MaxAttempts per event (default 3), RetryDelay between them (2s),
	// Timeout of one attempt (10s).
	MaxAttempts int
	RetryDelay  time.Duration
	Timeout     time.Duration
	// PerDestination is how many deliveries run at once to one destination
	// (scheme, host and port; default 4), and QueuePerDestination how many
	// more wait for it in this replica (default 100): a slow or dead
	// receiver holds only its own deliveries, never another's.
	PerDestination      int
	QueuePerDestination int
	// AllowPrivate lets loopback and private addresses receive webhooks
	// (a local receiver); link-local and cloud metadata addresses are
	// refused always.
	AllowPrivate bool
	// UserAgent is sent as User-Agent (default "aptix/dev").
	UserAgent string
}

// WebhookConfigFromEnv reads APTIX_WEBHOOK_SECRET, APTIX_WEBHOOK_MAX_ATTEMPTS,
// APTIX_WEBHOOK_RETRY_DELAY, APTIX_WEBHOOK_TIMEOUT,
// APTIX_WEBHOOK_CONCURRENCY (per destination), APTIX_WEBHOOK_QUEUE (per
// destination) and APTIX_WEBHOOK_ALLOW_PRIVATE=1.
func WebhookConfigFromEnv() (*WebhookConfig, error) {
	c := &WebhookConfig{Secret: os.Getenv("APTIX_WEBHOOK_SECRET"), AllowPrivate: os.Getenv("APTIX_WEBHOOK_ALLOW_PRIVATE") == "1"}
	if c.Secret != "" {
		if _, err := webhookKey(c.Secret); err != nil {
			return nil, fmt.Errorf("APTIX_WEBHOOK_SECRET: %w", err)
		}
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{{"APTIX_WEBHOOK_MAX_ATTEMPTS", &c.MaxAttempts}, {"APTIX_WEBHOOK_CONCURRENCY", &c.PerDestination}, {"APTIX_WEBHOOK_QUEUE", &c.QueuePerDestination}} {
		if v := os.Getenv(n.name); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i < 1 {
				return nil, fmt.Errorf("%s %q: want a positive integer", n.name, v)
			}
			*n.dst = i
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"APTIX_WEBHOOK_RETRY_DELAY", &c.RetryDelay}, {"APTIX_WEBHOOK_TIMEOUT", &c.Timeout}} {
		if v := os.Getenv(d.name); v != "" {
			var err error
			if *d.dst, err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("%s %q: %w", d.name, v, err)
			}
		}
	}
	return c, nil
}

func (c *WebhookConfig) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 2 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.UserAgent == "" {
		c.UserAgent = "aptix/dev"
	}
	if c.PerDestination <= 0 {
		c.PerDestination = 4
	}
	if c.QueuePerDestination <= 0 {
		c.QueuePerDestination = 100
	}
}

// webhookKey decodes a Standard Webhooks secret.
func webhookKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(k) == 0 {
		return nil, fmt.Errorf("not a whsec_<base64> secret: %w", err)
	}
	return k, nil
}

// WebhookConsumer is the durable consumer every gateway replica shares:
// each completion is delivered to one replica, and one not acknowledged
// (a crash, a restart) is delivered again. The history trimmer keeps every
// completion from this consumer's first unacknowledged one on (up to
// APTIX_HISTORY_MAX_AGE), so a pending webhook outlives the trim of the
// history it was sent from (docs/reliability.md).
const WebhookConsumer = "aptix-gateway-webhooks"

// webhookDead is where a delivery that exhausted its attempts goes, with
// the reason in aptix-dead-reason.
var webhookDead = contracts.DeadSubject(history.DeadWebhook)

// webhooks delivers the webhooks of terminal responses.
//
// The consumer's callback only looks the response up and queues the
// delivery by destination (scheme, host and port); each destination runs
// at most PerDestination deliveries at once, each attempt bounded by
// Timeout and retried after RetryDelay in this process, and holds at most
// QueuePerDestination more: a completion for a destination whose queue is
// full is handed back to the consumer for later (no attempt counted).
// Every held completion is kept in progress, so the server redelivers it
// only if this replica goes away. Delivery was serial: one receiver that
// hung kept every other tenant's webhooks waiting behind it.
type webhooks struct {
	a      *App
	cfg    WebhookConfig
	key    []byte
	client *http.Client
	cc     jetstream.ConsumeContext

	ctx    context.Context // ends at stop: deliveries in flight give up
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	dests  map[string]*destination
	held   map[jetstream.Msg]struct{} // queued or in flight, kept in progress
}

// destination is one receiver's queue.
type destination struct {
	queue  []delivery
	active int
}

// delivery is one webhook to send: the response as of its completion, so
// it no longer depends on the stored completion.
type delivery struct {
	m        jetstream.Msg
	id, url  string
	event    string
	resp     responses.Response
	attempts int // made before this delivery began (a redelivery's)
}

// startWebhooks creates (or binds to) the durable consumer on completed
// events and starts consuming.
func (a *App) startWebhooks(ctx context.Context, cfg WebhookConfig) (*webhooks, error) {
	cfg.defaults()
	wh := &webhooks{a: a, cfg: cfg, client: ssrfSafeClient(cfg.AllowPrivate), dests: map[string]*destination{}, held: map[jetstream.Msg]struct{}{}}
	wh.ctx, wh.cancel = context.WithCancel(context.Background())
	if cfg.Secret != "" {
		var err error
		if wh.key, err = webhookKey(cfg.Secret); err != nil {
			return nil, err
		}
	} else {
		a.log.Warn("webhooks are sent unsigned: set APTIX_WEBHOOK_SECRET=whsec_<base64>")
	}
	cons, err := a.js.CreateOrUpdateConsumer(ctx, contracts.StreamName, jetstream.ConsumerConfig{
		Durable: WebhookConsumer, Description: "Aptix gateway: webhooks of terminal responses",
		FilterSubject: contracts.StageFilter(contracts.StageCompleted),
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		// Attempts are counted by the gateway (a completion handed back
		// for a full destination queue is not an attempt), so the server
		// redelivers without limit; held completions are kept in progress.
		AckWait: webhookAckWait, MaxDeliver: -1, MaxAckPending: webhookMaxAckPending,
		// A gateway gone this long no longer pins completions in history
		// (pkg/pipeline's trimmer keeps what this consumer has not acknowledged).
		InactiveThreshold: webhookInactive,
	})
	if err != nil {
		return nil, fmt.Errorf("webhook consumer: %w", err)
	}
	wh.wg.Add(1)
	go wh.keepInProgress()
	if wh.cc, err = cons.Consume(wh.handle); err != nil {
		wh.cancel()
		return nil, fmt.Errorf("webhook consumer: %w", err)
	}
	return wh, nil
}

const (
	// webhookAckWait is how long a replica that went away keeps its held
	// completions from the others.
	webhookAckWait = 30 * time.Second
	// webhookMaxAckPending bounds the completions held at once, across
	// destinations.
	webhookMaxAckPending = 4096
	// webhookInactive is how long webhooks stay pending with no gateway
	// running: past it the consumer is removed, and completions stored
	// meanwhile send none.
	webhookInactive = 24 * time.Hour
)

// stop stops consuming, ends the deliveries in flight and hands every held
// completion back for another replica (or the next start): one waiting
// for its retry after a failed attempt for the rest of its retry delay,
// the others at once.
//
// The hand-backs wait until this replica's subscription is gone and are
// flushed before stop returns. Why: a completion handed back while the
// subscription still took messages was redelivered to it at once, dropped
// by the stopped consumer, and came again only after the ack wait (30 s
// after a restart, where the retry delay was 1 s); one still buffered when
// the connection closed was not handed back at all.
func (wh *webhooks) stop() {
	wh.cc.Stop()
	select {
	case <-wh.cc.Closed():
	case <-time.After(webhookStopWait):
	}
	wh.cancel()
	wh.mu.Lock()
	for _, d := range wh.dests {
		for _, q := range d.queue {
			_ = q.m.Nak()
			delete(wh.held, q.m)
		}
		d.queue = nil
	}
	wh.mu.Unlock()
	wh.wg.Wait()
	if err := wh.a.js.Conn().FlushTimeout(webhookStopWait); err != nil {
		wh.a.log.Warn("webhooks handed back may not have reached the server; they are redelivered after the ack wait", "err", err)
	}
}

// webhookStopWait bounds each wait of stop (the subscription's end, the
// flush of the hand-backs): a connection already lost must not hold it.
const webhookStopWait = 2 * time.Second

// keepInProgress tells the server every held completion is still being
// worked on, so none is redelivered to another replica meanwhile.
func (wh *webhooks) keepInProgress() {
	defer wh.wg.Done()
	t := time.NewTicker(webhookAckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-wh.ctx.Done():
			return
		case <-t.C:
		}
		wh.mu.Lock()
		held := make([]jetstream.Msg, 0, len(wh.held))
		for m := range wh.held {
			held = append(held, m)
		}
		wh.mu.Unlock()
		for _, m := range held {
			_ = m.InProgress()
		}
	}
}

// responseID is the response id of a gateway turn ("resp_" + the turn's
// UUIDv7 in hex), or "" for a turn the gateway did not create.
func responseID(turnID string) string {
	u, err := uuid.Parse(turnID)
	if err != nil {
		return ""
	}
	return "resp_" + hex.EncodeToString(u[:])
}

// handle takes one completion: a response that asked for a webhook is
// queued for its destination; anything else is acknowledged.
func (wh *webhooks) handle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(wh.ctx, 10*time.Second)
	defer cancel()
	_, conv, turnID, ok := contracts.ParseSubject(m.Subject())
	id := responseID(turnID)
	if !ok || id == "" {
		_ = m.Ack()
		return
	}
	meta, err := wh.a.completionRecord(ctx, id, conv, turnID, m)
	if err != nil {
		_ = m.NakWithDelay(wh.cfg.RetryDelay)
		return
	}
	if meta == nil || meta.TurnID != turnID || meta.ConversationID != conv {
		// Not a stored response (or deleted), or another conversation's
		// turn that took the response's turn id (POST /v1/aptix/execute
		// lets a client choose it): nobody to tell.
		_ = m.Ack()
		return
	}
	if responses.Pending(*meta, "").Metadata["webhook_url"] == "" {
		// No webhook asked for (the echoed metadata says): the response's
		// state is not read.
		_ = m.Ack()
		return
	}
	resp, err := wh.a.completedResponse(ctx, meta, m)
	if err != nil {
		_ = m.NakWithDelay(wh.cfg.RetryDelay)
		return
	}
	target := resp.Metadata["webhook_url"]
	event := "response." + resp.Status
	if target == "" || !wantsEvent(resp.Metadata["webhook_events"], event) {
		_ = m.Ack()
		return
	}
	d := delivery{m: m, id: id, url: target, event: event, resp: resp}
	// A completion re-driven from its dead letter (`aptix dead retry`)
	// starts the delivery over; any other completion whose delivery ended
	// was settled before a crash lost its acknowledgement.
	redriven := m.Headers().Get(contracts.HeaderRedrive) != ""
	if prev := resp.Webhook; prev != nil && prev.Event == event && !(redriven && prev.Status == "failed") {
		switch prev.Status {
		case "delivered", "failed":
			_ = m.Ack() // done before a crash lost the acknowledgement
			return
		case "retrying":
			d.attempts = prev.Attempts
		}
	}
	wh.enqueue(d)
}

// destinationOf is the queue a URL's deliveries share.
func destinationOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// enqueue queues d for its destination, or hands it back for later when
// that destination's queue is full.
func (wh *webhooks) enqueue(d delivery) {
	key := destinationOf(d.url)
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if wh.ctx.Err() != nil {
		_ = d.m.Nak()
		return
	}
	dest := wh.dests[key]
	if dest == nil {
		dest = &destination{}
		wh.dests[key] = dest
	}
	if len(dest.queue) >= wh.cfg.QueuePerDestination {
		_ = d.m.NakWithDelay(max(wh.cfg.RetryDelay, wh.cfg.Timeout))
		return
	}
	wh.held[d.m] = struct{}{}
	dest.queue = append(dest.queue, d)
	if dest.active < wh.cfg.PerDestination {
		dest.active++
		wh.wg.Add(1)
		go wh.work(key, dest)
	}
}

// work delivers a destination's queue until it is empty.
func (wh *webhooks) work(key string, dest *destination) {
	defer wh.wg.Done()
	for {
		wh.mu.Lock()
		if len(dest.queue) == 0 || wh.ctx.Err() != nil {
			dest.active--
			if dest.active == 0 && len(dest.queue) == 0 {
				delete(wh.dests, key)
			}
			wh.mu.Unlock()
			return
		}
		d := dest.queue[0]
		dest.queue = dest.queue[1:]
		wh.mu.Unlock()
		wh.deliver(d)
		wh.mu.Lock()
		delete(wh.held, d.m)
		wh.mu.Unlock()
	}
}

// deliver makes the attempts of one delivery and settles its completion.
func (wh *webhooks) deliver(d delivery) {
	ctx := wh.ctx
	for attempt := d.attempts + 1; ; attempt++ {
		err := wh.send(ctx, d.url, d.event, d.resp)
		switch {
		case ctx.Err() != nil:
			_ = d.m.Nak() // stopping: another replica (or the next start) sends it
			return
		case err == nil:
			wh.record(ctx, d.id, responses.WebhookStatus{Status: "delivered", Event: d.event, Attempts: attempt})
			_ = d.m.Ack()
			return
		case errors.Is(err, errRefusedURL) || attempt >= wh.cfg.MaxAttempts:
			wh.deadLetter(ctx, d.m, d.id, d.event, attempt, err)
			return
		}
		wh.a.log.Info("webhook attempt failed, retrying", "response", d.id, "attempt", attempt, "err", err)
		next := time.Now().Add(wh.cfg.RetryDelay)
		wh.record(ctx, d.id, responses.WebhookStatus{Status: "retrying", Event: d.event, Attempts: attempt, Error: err.Error()})
		select {
		case <-ctx.Done():
			// Stopping: whoever takes it next makes the next attempt
			// when it is due, not at once.
			_ = d.m.NakWithDelay(max(time.Until(next), 0))
			return
		case <-time.After(time.Until(next)):
		}
	}
}

// wantsEvent applies metadata.webhook_events (comma-separated; empty:
// every terminal event).
func wantsEvent(filter, event string) bool {
	if strings.TrimSpace(filter) == "" {
		return true
	}
	return slices.ContainsFunc(strings.Split(filter, ","), func(e string) bool {
		e = strings.TrimSpace(e)
		return e == event || "response."+e == event
	})
}

// Payload is the seed's webhook body.
type Payload struct {
	ID          string                   `json:"id"`
	Event       string                   `json:"event"`
	Status      string                   `json:"status"`
	Output      []json.RawMessage        `json:"output,omitempty"`
	Error       *responses.ResponseError `json:"error,omitempty"`
	Usage       *responses.Usage         `json:"usage,omitempty"`
	Metadata    map[string]string        `json:"metadata"`
	CreatedAt   int64                    `json:"created_at"`
	CompletedAt *int64                   `json:"completed_at,omitempty"`
	CancelledAt *int64                   `json:"cancelled_at,omitempty"`
	FailedAt    *int64                   `json:"failed_at,omitempty"`
}

// send makes one attempt: signed POST, 2xx is success.
func (wh *webhooks) send(ctx context.Context, url, event string, r responses.Response) error {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return fmt.Errorf("%w: %q is not http(s)", errRefusedURL, url)
	}
	body, err := json.Marshal(Payload{ID: r.ID, Event: event, Status: r.Status, Output: r.Output, Error: r.Error, Usage: r.Usage,
		Metadata: r.Metadata, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, CancelledAt: r.CancelledAt, FailedAt: r.FailedAt})
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wh.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", errRefusedURL, err)
	}
	// The id names the event, not the attempt: a receiver de-duplicates
	// on it when a retry follows an answer that did not reach Aptix.
	msgID := "msg_" + r.ID + "_" + r.Status
	ts := strconv.FormatInt(wh.a.cfg.Now().Unix(), 10)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", wh.cfg.UserAgent)
	h.Set("X-Aptix-Event", event)
	h.Set("X-Aptix-Response-ID", r.ID)
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", ts)
	if wh.key != nil {
		h.Set("webhook-signature", "v1,"+Sign(wh.key, msgID, ts, body))
	}
	res, err := wh.client.Do(req)
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("webhook receiver answered %d", res.StatusCode)
	}
	return nil
}

// Sign is the Standard Webhooks signature: base64 of HMAC-SHA256 over
// "id.timestamp.body" with the decoded secret.
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// deadLetter ends a delivery that cannot succeed: the event goes to
// aptix.dead.webhook with the reason, the response's webhook status says
// failed, and the completion is terminated (never redelivered).
func (wh *webhooks) deadLetter(ctx context.Context, m jetstream.Msg, id, event string, attempts int, cause error) {
	wh.a.log.Warn("webhook dead-lettered", "response", id, "event", event, "attempts", attempts, "err", cause)
	// Recorded first: whoever sees the dead letter finds the status.
	wh.record(ctx, id, responses.WebhookStatus{Status: "failed", Event: event, Attempts: attempts, Error: cause.Error()})
	// Filed as a stage files its dead letters (the completion's own
	// headers, its subject, the attempts), so `aptix dead` and the console
	// list it with its source and subject and can re-drive it: it had
	// only the reason, and listed as from nowhere.
	h := nats.Header{}
	for k, v := range m.Headers() {
		if !pipeline.PublishDirective(k) && k != contracts.HeaderRedrive {
			h[k] = v
		}
	}
	h.Set(contracts.HeaderDeadReason, cause.Error())
	h.Set(contracts.HeaderDeadStage, history.DeadWebhook)
	h.Set(contracts.HeaderDeadSubject, m.Subject())
	h.Set(contracts.HeaderDeadDeliveries, strconv.Itoa(attempts))
	h.Set("aptix-response-id", id)
	if _, err := wh.a.js.PublishMsg(ctx, &nats.Msg{Subject: webhookDead, Data: m.Data(), Header: h}); err != nil {
		wh.a.log.Warn("webhook dead letter not stored", "response", id, "err", err)
	}
	_ = m.Term()
}

func (wh *webhooks) record(ctx context.Context, id string, st responses.WebhookStatus) {
	b, _ := json.Marshal(st)
	if _, err := wh.a.store.kv.Put(ctx, webhookKeyOf(id), b); err != nil {
		wh.a.log.Warn("webhook status not recorded", "response", id, "err", err)
	}
}

// webhookKeyOf is the KV key of a response's webhook status.
func webhookKeyOf(id string) string { return "webhook." + id }

// webhookStatus is the recorded delivery of id's webhook (nil: none yet).
func (a *App) webhookStatus(ctx context.Context, id string) *responses.WebhookStatus {
	e, err := a.store.kv.Get(ctx, webhookKeyOf(id))
	if err != nil {
		return nil
	}
	var st responses.WebhookStatus
	if json.Unmarshal(e.Value(), &st) != nil {
		return nil
	}
	return &st
}
