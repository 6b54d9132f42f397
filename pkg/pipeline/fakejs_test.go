package pipeline

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// memJS is a JetStream that keeps what is published in memory: enough for
// the stage runtime's steps to run without a server (tests of one step, the
// handling benchmarks). Any other call panics on the nil interface.
type memJS struct {
	jetstream.JetStream
	mu  sync.Mutex
	got []*nats.Msg
	n   int
	// fail, when set, is what a publish on a subject returns.
	fail func(subject string) error
	// discard keeps nothing (benchmarks): a growing heap would be measured too.
	discard bool
}

func (j *memJS) PublishMsg(_ context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if j.fail != nil {
		if err := j.fail(m.Subject); err != nil {
			return nil, err
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n++
	if !j.discard {
		j.got = append(j.got, m)
	}
	return &jetstream.PubAck{Stream: contracts.StreamName, Sequence: uint64(j.n)}, nil
}

// published are the subjects stored so far.
func (j *memJS) published() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, len(j.got))
	for i, m := range j.got {
		out[i] = m.Subject
	}
	return out
}

// memRunner is a runner of st publishing into a memJS.
func memRunner(st Stage, sc SubscriberConfig) (*runner, *memJS) {
	js := &memJS{}
	sc = sc.withDefaults()
	return &runner{st: st, sub: sc, pub: NewPublisher(js), js: js, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, js
}

// delivery is an event as the Subscriber hands it to the runtime.
func delivery(subject string, delivered int, payload []byte) *message.Message {
	msg := message.NewMessage("id-"+strconv.Itoa(delivered), payload)
	msg.Metadata.Set(MetaSubject, subject)
	msg.Metadata.Set(MetaDelivered, strconv.Itoa(delivered))
	return msg
}
