package httpapi

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
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// WebhookConfig configures webhook delivery (issue 16). A nil
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
	// AllowPrivate lets loopback and private addresses receive webhooks
	// (a local receiver); link-local and cloud metadata addresses are
	// refused always.
	AllowPrivate bool
	// UserAgent is sent as User-Agent (default "aptix/dev").
	UserAgent string
}

// WebhookConfigFromEnv reads APTIX_WEBHOOK_SECRET, APTIX_WEBHOOK_MAX_ATTEMPTS,
// APTIX_WEBHOOK_RETRY_DELAY, APTIX_WEBHOOK_TIMEOUT and
// APTIX_WEBHOOK_ALLOW_PRIVATE=1.
func WebhookConfigFromEnv() (*WebhookConfig, error) {
	c := &WebhookConfig{Secret: os.Getenv("APTIX_WEBHOOK_SECRET"), AllowPrivate: os.Getenv("APTIX_WEBHOOK_ALLOW_PRIVATE") == "1"}
	if c.Secret != "" {
		if _, err := webhookKey(c.Secret); err != nil {
			return nil, fmt.Errorf("APTIX_WEBHOOK_SECRET: %w", err)
		}
	}
	if v := os.Getenv("APTIX_WEBHOOK_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("APTIX_WEBHOOK_MAX_ATTEMPTS %q: want a positive integer", v)
		}
		c.MaxAttempts = n
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
// (a crash, a restart, a failing receiver) is delivered again.
const WebhookConsumer = "aptix-gateway-webhooks"

// webhookDead is where a delivery that exhausted its attempts goes, with
// the reason in aptix-dead-reason.
var webhookDead = contracts.DeadSubject("webhook")

// webhooks delivers the webhooks of terminal responses.
type webhooks struct {
	s      *Server
	cfg    WebhookConfig
	key    []byte
	client *http.Client
	cc     jetstream.ConsumeContext
}

// startWebhooks creates (or binds to) the durable consumer on completed
// events and starts consuming. Delivery needs no goroutine per request and
// no timer of its own: the consumer's redelivery is the retry queue.
func (s *Server) startWebhooks(ctx context.Context, cfg WebhookConfig) (*webhooks, error) {
	cfg.defaults()
	wh := &webhooks{s: s, cfg: cfg, client: ssrfSafeClient(cfg.AllowPrivate)}
	if cfg.Secret != "" {
		var err error
		if wh.key, err = webhookKey(cfg.Secret); err != nil {
			return nil, err
		}
	} else {
		s.log.Warn("webhooks are sent unsigned: set APTIX_WEBHOOK_SECRET=whsec_<base64>")
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, contracts.StreamName, jetstream.ConsumerConfig{
		Durable: WebhookConsumer, Description: "Aptix gateway: webhooks of terminal responses",
		FilterSubject: contracts.StageFilter(contracts.StageCompleted),
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: cfg.Timeout + 5*time.Second, MaxDeliver: cfg.MaxAttempts + 1, MaxAckPending: 256,
	})
	if err != nil {
		return nil, fmt.Errorf("webhook consumer: %w", err)
	}
	if wh.cc, err = cons.Consume(wh.handle); err != nil {
		return nil, fmt.Errorf("webhook consumer: %w", err)
	}
	return wh, nil
}

func (wh *webhooks) stop() { wh.cc.Stop() }

// responseID is the response id of a gateway turn ("resp_" + the turn's
// UUIDv7 in hex), or "" for a turn the gateway did not create.
func responseID(turnID string) string {
	u, err := uuid.Parse(turnID)
	if err != nil {
		return ""
	}
	return "resp_" + hex.EncodeToString(u[:])
}

// handle delivers one completion's webhook, if its response asked for one.
func (wh *webhooks) handle(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), wh.cfg.Timeout+2*time.Second)
	defer cancel()
	_, conv, turnID, ok := contracts.ParseSubject(m.Subject())
	id := responseID(turnID)
	if !ok || id == "" {
		_ = m.Ack()
		return
	}
	meta, err := wh.s.store.Get(ctx, id)
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
	resp, err := wh.s.current(ctx, meta)
	if err != nil {
		_ = m.NakWithDelay(wh.cfg.RetryDelay)
		return
	}
	url := resp.Metadata["webhook_url"]
	event := "response." + resp.Status
	if url == "" || !wantsEvent(resp.Metadata["webhook_events"], event) {
		_ = m.Ack()
		return
	}
	attempt := 1
	if md, err := m.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	err = wh.send(ctx, url, event, resp)
	switch {
	case err == nil:
		_ = m.Ack()
		wh.record(ctx, id, responses.WebhookStatus{Status: "delivered", Event: event, Attempts: attempt})
	case errors.Is(err, errRefusedURL) || attempt >= wh.cfg.MaxAttempts:
		wh.deadLetter(ctx, m, id, event, attempt, err)
	default:
		wh.s.log.Info("webhook attempt failed, retrying", "response", id, "attempt", attempt, "err", err)
		_ = m.NakWithDelay(wh.cfg.RetryDelay)
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
	ts := strconv.FormatInt(wh.s.cfg.Now().Unix(), 10)
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
	wh.s.log.Warn("webhook dead-lettered", "response", id, "event", event, "attempts", attempts, "err", cause)
	// Recorded first: whoever sees the dead letter finds the status.
	wh.record(ctx, id, responses.WebhookStatus{Status: "failed", Event: event, Attempts: attempts, Error: cause.Error()})
	h := nats.Header{}
	h.Set(contracts.HeaderDeadReason, cause.Error())
	h.Set("aptix-response-id", id)
	if _, err := wh.s.js.PublishMsg(ctx, &nats.Msg{Subject: webhookDead, Data: m.Data(), Header: h}); err != nil {
		wh.s.log.Warn("webhook dead letter not stored", "response", id, "err", err)
	}
	_ = m.Term()
}

func (wh *webhooks) record(ctx context.Context, id string, st responses.WebhookStatus) {
	b, _ := json.Marshal(st)
	if _, err := wh.s.store.kv.Put(ctx, webhookKeyOf(id), b); err != nil {
		wh.s.log.Warn("webhook status not recorded", "response", id, "err", err)
	}
}

// webhookKeyOf is the KV key of a response's webhook status.
func webhookKeyOf(id string) string { return "webhook." + id }

// webhookStatus is the recorded delivery of id's webhook (nil: none yet).
func (s *Server) webhookStatus(ctx context.Context, id string) *responses.WebhookStatus {
	e, err := s.store.kv.Get(ctx, webhookKeyOf(id))
	if err != nil {
		return nil
	}
	var st responses.WebhookStatus
	if json.Unmarshal(e.Value(), &st) != nil {
		return nil
	}
	return &st
}
