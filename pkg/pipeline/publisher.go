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
