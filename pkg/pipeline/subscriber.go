package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Metadata keys the subscriber adds to every watermill message.
const (
	// MetaSubject is the NATS subject the event was stored under.
	MetaSubject = "aptix-subject"
	// MetaDelivered is JetStream's delivery count of the event (1 on first delivery).
	MetaDelivered = "aptix-delivered"
	// MetaStreamSeq is the event's stream sequence, for logs and `aptix events`.
	MetaStreamSeq = "aptix-stream-seq"
)

// SubscriberConfig tunes a durable pull subscription. Zero values take the defaults.
type SubscriberConfig struct {
	// Stream holds the subjects subscribed to (default APTIX).
	Stream string
	// Durable names the consumer; replicas using the same name share the
	// work. Empty derives a name from the topic.
	Durable string
	// AckWait is how long the server waits for an ack before redelivering;
	// while a handler runs the subscriber sends in-progress acks every third of it.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one event; the stage dead-letters on the last.
	MaxDeliver int
	// MaxAckPending bounds the events in flight per consumer: the stage's concurrency.
	MaxAckPending int
	// Backoff is the redelivery delay after a failed attempt n (index n-1;
	// the last entry repeats), so a failing handler is not retried in a tight loop.
	Backoff []time.Duration
	// CreateStream creates a stream named after the topic if none captures it
	// (tests and watermill's universal suite; the pipeline provisions APTIX).
	CreateStream bool
	// DrainTimeout bounds how long Close waits for handlers in flight.
	DrainTimeout time.Duration
	Logger       watermill.LoggerAdapter
}

func (c SubscriberConfig) withDefaults() SubscriberConfig {
	if c.Stream == "" {
		c.Stream = contracts.StreamName
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 256
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second}
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	return c
}

// BackoffFor is the redelivery delay after the given (1-based) delivery failed.
func (c SubscriberConfig) BackoffFor(delivered int) time.Duration {
	b := c.withDefaults().Backoff
	return b[min(max(delivered-1, 0), len(b)-1)]
}

// Subscriber is a watermill Subscriber over JetStream durable pull consumers.
// It exists because watermill-nats falls short for long LLM calls
// (docs/architecture.md#the-stage-runtime): its AckWait is client-side only, an undecodable message is redelivered
// forever, and failures are retried in a tight loop. Here the server's AckWait
// is kept alive with in-progress acks, a Nack becomes NakWithDelay with a
// growing delay, and up to MaxAckPending events are handled concurrently.
type Subscriber struct {
	js      jetstream.JetStream
	cfg     SubscriberConfig
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// NewSubscriber returns a Subscriber; consumers are created on Subscribe.
func NewSubscriber(js jetstream.JetStream, cfg SubscriberConfig) *Subscriber {
	return &Subscriber{js: js, cfg: cfg.withDefaults(), closing: make(chan struct{})}
}

// Subscribe creates (or joins) the durable consumer for topic, a subject
// filter, and delivers its events until ctx ends or the Subscriber closes.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	cons, err := s.consumer(ctx, topic)
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(s.cfg.MaxAckPending))
	if err != nil {
		return nil, fmt.Errorf("pull from %s: %w", topic, err)
	}
	out := make(chan *message.Message)
	sem := make(chan struct{}, s.cfg.MaxAckPending)
	var inflight sync.WaitGroup
	done := s.stopped(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-done
		// Drain, not Stop: events already fetched into the client's buffer
		// come out of Next and are handed back below (Nak, no delay), so a
		// restart takes them at once instead of after AckWait.
		it.Drain()
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer inflight.Wait()
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				s.cfg.Logger.Error("pull failed", err, watermill.LogFields{"topic": topic})
				continue
			}
			select {
			case <-done:
				_ = m.Nak() // not started: hand it to another replica now
				continue
			default:
			}
			select {
			case sem <- struct{}{}:
			case <-done:
				_ = m.Nak() // not started: hand it to another replica now
				continue
			}
			inflight.Add(1)
			go func() {
				defer func() { <-sem; inflight.Done() }()
				s.deliver(ctx, done, out, m)
			}()
		}
	}()
	return out, nil
}

// stopped is closed when ctx ends or the Subscriber closes.
func (s *Subscriber) stopped(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		close(ch)
	}()
	return ch
}

func (s *Subscriber) consumer(ctx context.Context, topic string) (jetstream.Consumer, error) {
	stream := s.cfg.Stream
	durable := s.cfg.Durable
	if s.cfg.CreateStream {
		stream = topicStream(topic)
		if err := ensureTopicStream(ctx, s.js, topic); err != nil {
			return nil, err
		}
	}
	if durable == "" {
		durable = "C_" + hashName(topic)
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: topic,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxDeliver:    s.cfg.MaxDeliver,
		MaxAckPending: s.cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
	}
	return cons, nil
}

// deliver hands one event to the router and settles it with the server:
// Ack, NakWithDelay, or (on shutdown before the handler finished) Nak.
// done is closed when the subscription stops (ctx ended or Close).
func (s *Subscriber) deliver(ctx context.Context, done <-chan struct{}, out chan<- *message.Message, m jetstream.Msg) {
	msg := toMessage(m)
	// A handler in flight outlives the subscription's context: shutdown
	// drains it (bounded by DrainTimeout) instead of failing its publish.
	msgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	msg.SetContext(msgCtx)
	select {
	case out <- msg:
	case <-done:
		_ = m.Nak() // not started: hand it to another replica now
		return
	}
	keepAlive := time.NewTicker(s.cfg.AckWait / 3)
	defer keepAlive.Stop()
	var drainDeadline <-chan time.Time
	stopping := done
	for {
		select {
		case <-msg.Acked():
			if err := m.Ack(); err != nil {
				s.cfg.Logger.Error("ack failed", err, watermill.LogFields{"subject": m.Subject()})
			}
			return
		case <-msg.Nacked():
			delivered, _ := strconv.Atoi(msg.Metadata.Get(MetaDelivered))
			_ = m.NakWithDelay(s.cfg.BackoffFor(delivered))
			return
		case <-keepAlive.C:
			_ = m.InProgress()
		case <-stopping:
			// Graceful drain: let the handler finish, within a bound.
			stopping = nil
			drainDeadline = time.After(s.cfg.DrainTimeout)
		case <-drainDeadline:
			cancel()
			_ = m.Nak()
			return
		}
	}
}

func toMessage(m jetstream.Msg) *message.Message {
	h := m.Headers()
	id := h.Get(contracts.HeaderMsgID)
	if id == "" {
		id = nuid.Next()
	}
	msg := message.NewMessage(id, m.Data())
	for k, v := range h {
		if len(v) > 0 {
			msg.Metadata.Set(k, v[0])
		}
	}
	msg.Metadata.Set(MetaSubject, m.Subject())
	if md, err := m.Metadata(); err == nil {
		msg.Metadata.Set(MetaDelivered, strconv.FormatUint(md.NumDelivered, 10))
		msg.Metadata.Set(MetaStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	}
	return msg
}

// Close stops fetching, waits for handlers in flight (up to DrainTimeout
// each), and closes every subscription channel.
func (s *Subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	s.wg.Wait()
	return nil
}

// topicStream names the stream ensureTopicStream makes for a topic.
func topicStream(topic string) string { return "T_" + hashName(topic) }

func ensureTopicStream(ctx context.Context, js jetstream.JetStream, topic string) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: topicStream(topic), Subjects: []string{topic}, Duplicates: 2 * time.Minute})
	if err != nil {
		return fmt.Errorf("create stream for %s: %w", topic, err)
	}
	return nil
}

func hashName(topic string) string {
	sum := sha256.Sum256([]byte(topic))
	return hex.EncodeToString(sum[:8])
}
