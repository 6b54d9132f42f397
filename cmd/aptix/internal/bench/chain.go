package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chain is the floor of the bus: the same shape as an Aptix turn with no
// work in it. The client publishes hop 0; four workers, each a durable pull
// consumer, consume hop i and publish hop i+1 (waiting for the stream's ack,
// then acking their input, as Aptix stages do); the client reads hop 4 from
// the stream. Five stored publishes per chain, each of the payload size Aptix
// carries at that hop.
type chain struct {
	nc      *nats.Conn // the workers'
	client  *nats.Conn
	js      jetstream.JetStream // the client's
	sizes   [5]int
	workers []jetstream.ConsumeContext
	done    jetstream.ConsumeContext
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

const chainStream = "BENCHCHAIN"

func chainSubject(hop int, id string) string { return "chain.h" + strconv.Itoa(hop) + "." + id }

// newChain creates the stream and the four workers on one connection, as the
// all-in-one runs its stages, and the client on another.
func newChain(ctx context.Context, url string, sizes [5]int, maxAckPending int) (*chain, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	client, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	cjs, err := jetstream.New(client)
	if err != nil {
		return nil, err
	}
	c := &chain{nc: nc, client: client, js: cjs, sizes: sizes, waiting: map[string]chan struct{}{}}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: chainStream, Subjects: []string{"chain.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("chain stream: %w", err)
	}
	payloads := make([][]byte, 5)
	for i, n := range sizes {
		payloads[i] = make([]byte, n)
		for j := range payloads[i] {
			payloads[i][j] = 'x'
		}
	}
	for hop := range 4 {
		cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: "hop" + strconv.Itoa(hop), FilterSubject: "chain.h" + strconv.Itoa(hop) + ".>",
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: maxAckPending,
		})
		if err != nil {
			return nil, fmt.Errorf("chain consumer: %w", err)
		}
		out := payloads[hop+1]
		cc, err := cons.Consume(func(m jetstream.Msg) {
			id := m.Subject()[len("chain.h0."):]
			msg := &nats.Msg{Subject: chainSubject(hop+1, id), Data: out, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, id+"."+strconv.Itoa(hop+1))
			if _, err := js.PublishMsg(context.Background(), msg); err != nil {
				_ = m.Nak()
				return
			}
			_ = m.Ack()
		}, jetstream.PullMaxMessages(maxAckPending))
		if err != nil {
			return nil, err
		}
		c.workers = append(c.workers, cc)
	}
	done, err := cjs.OrderedConsumer(ctx, chainStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"chain.h4.>"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, err
	}
	c.done, err = done.Consume(func(m jetstream.Msg) {
		id := m.Subject()[len("chain.h4."):]
		c.mu.Lock()
		ch := c.waiting[id]
		delete(c.waiting, id)
		c.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// run sends one payload through the five hops and waits for it to arrive.
func (c *chain) run(ctx context.Context, id string, first []byte) error {
	ch := make(chan struct{})
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	msg := &nats.Msg{Subject: chainSubject(0, id), Data: first, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id+".0")
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("chain publish: %w", err)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("chain %s: %w", id, ctx.Err())
	}
}

func (c *chain) close() {
	for _, w := range c.workers {
		w.Stop()
	}
	c.done.Stop()
	c.nc.Close()
	c.client.Close()
}
