package pipeline

import (
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

// TestUniversalPubSub runs watermill's own Pub/Sub contract suite against the
// JetStream Subscriber and Publisher (docs/architecture.md#the-stage-runtime).
func TestUniversalPubSub(t *testing.T) {
	_, url := natstest.Start(t)
	cfg := SubscriberConfig{CreateStream: true, AckWait: 5 * time.Second, MaxDeliver: 1000, MaxAckPending: 16,
		Backoff: []time.Duration{10 * time.Millisecond}, DrainTimeout: 5 * time.Second}
	construct := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		_, js := natstest.Connect(t, url)
		c := cfg
		c.Durable = group
		return NewTopicPublisher(js), NewSubscriber(js, c)
	}
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:                   true,
		ExactlyOnceDelivery:              false,
		GuaranteedOrder:                  false,
		Persistent:                       true,
		NewSubscriberReceivesOldMessages: false,
		// The short variant keeps make test fast; APTIX_PUBSUB_FULL=1 runs all.
		ForceShort: os.Getenv("APTIX_PUBSUB_FULL") == "",
	},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return construct(t, "") },
		construct,
	)
}
