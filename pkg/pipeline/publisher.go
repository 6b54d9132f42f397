package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Publisher is a watermill Publisher onto JetStream. The topic is the full
// subject; the message UUID becomes Nats-Msg-Id, so a re-published event is
// de-duplicated by the server; metadata become headers, except the keys the
// Subscriber added for the handler.
type Publisher struct {
	js jetstream.JetStream
	// claims, when set, stores payloads above maxInline and publishes a stub
	// (pkg/pipeline/claim).
	claims    *claim.Store
	maxInline int
	// maxEvent, when set, refuses a payload above it (MaxEventBytes).
	maxEvent int
	// createStream makes a stream per topic on first use (tests and
	// watermill's universal suite; the pipeline provisions APTIX).
	createStream bool
	created      sync.Map
}

// NewPublisher returns a Publisher onto existing streams.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// NewTopicPublisher returns a Publisher that creates a stream for each new
// topic, as Subscriber does with SubscriberConfig.CreateStream.
func NewTopicPublisher(js jetstream.JetStream) *Publisher {
	return &Publisher{js: js, createStream: true}
}

// Publish stores each message and waits for the server's ack.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		ctx := msg.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		if p.createStream {
			if _, done := p.created.Load(topic); !done {
				if err := ensureTopicStream(ctx, p.js, topic); err != nil {
					return err
				}
				p.created.Store(topic, true)
			}
		}
		out := toNATS(topic, msg)
		if p.maxEvent > 0 && len(out.Data) > p.maxEvent {
			return &Rejection{Code: CodeEventTooLarge, Message: fmt.Sprintf(
				"the %s event is %d bytes, more than the %d an event may be (%s): it was not stored", topic, len(out.Data), p.maxEvent, layout.EnvMaxEventBytes)}
		}
		if p.claims != nil && len(out.Data) > p.maxInline {
			if err := p.claim(ctx, out); err != nil {
				return err
			}
		}
		ack, err := p.js.PublishMsg(ctx, out)
		if out.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != "" {
			err = notFirst(ack, err)
		}
		if err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
	}
	return nil
}

// DefaultMaxEventBytes caps one stored event. An event above the
// connection's max payload goes whole to the claim store, which has no cap
// of its own: without this one, a 200 MB upstream answer became events of
// hundreds of MB (872 MB of disk for one turn), each read whole by every
// stage after it. An event holds the upstream answer at most about three
// times (the body, tool emulation's rewrite, the completion's
// rawResponseJson), so 64 MiB passes every answer under the default
// maxResponseBytes (16 MiB) with its request.
const DefaultMaxEventBytes = 64 << 20

// MaxEventBytes is APTIX_MAX_EVENT_BYTES, else DefaultMaxEventBytes. An
// event above it fails its turn with CodeEventTooLarge at once: retrying
// cannot make it smaller, and a stage redelivered for it would do its
// work (an LLM call) again.
func MaxEventBytes() int {
	if n := layout.IntFromEnv(layout.EnvMaxEventBytes); n > 0 {
		return n
	}
	return DefaultMaxEventBytes
}

// claim moves the payload to the claim store and leaves a stub.
// wouldClaim reports whether a payload of n bytes goes to the claim store.
func (p *Publisher) wouldClaim(n int) bool { return p.claims != nil && n > p.maxInline }

func (p *Publisher) claim(ctx context.Context, m *nats.Msg) error {
	obs, err := p.claims.Open(ctx)
	if err != nil {
		return err
	}
	key := claim.Key(m.Subject, m.Header.Get(contracts.HeaderMsgID))
	if _, err := obs.PutBytes(ctx, key, m.Data); err != nil {
		return fmt.Errorf("claim check %s (%d bytes): %w", key, len(m.Data), backpressure.Wrap(err))
	}
	_, conv, turnID, _ := contracts.ParseSubject(m.Subject)
	m.Header.Set(contracts.HeaderClaim, key)
	m.Data = claim.Stub(conv, turnID, key, len(m.Data))
	return nil
}

func toNATS(subject string, msg *message.Message) *nats.Msg {
	h := nats.Header{}
	for k, v := range msg.Metadata {
		if k == MetaSubject || k == MetaDelivered || k == MetaStreamSeq {
			continue
		}
		h[k] = []string{v}
	}
	h[contracts.HeaderMsgID] = []string{msg.UUID}
	return &nats.Msg{Subject: subject, Data: msg.Payload, Header: h}
}

// PublishDirective reports whether a header is an instruction to JetStream
// for one publish (Nats-Expected-Last-Subject-Sequence, Nats-Msg-Id,
// Nats-Rollup, Nats-TTL, ...) rather than part of the event. Such a header
// must never be copied onto another publish: a dead letter or a retried
// event that kept the retriever's "this subject holds nothing yet"
// expectation would be refused as soon as its subject holds one event.
func PublishDirective(key string) bool {
	return len(key) >= 5 && strings.EqualFold(key[:5], "nats-")
}

// Close does nothing: the connection belongs to the caller.
func (p *Publisher) Close() error { return nil }
