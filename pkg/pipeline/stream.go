// Package pipeline is the one way an Aptix stage runs on NATS JetStream: a
// watermill Router over durable pull consumers (subscriber.go, publisher.go),
// with tracing, bounded retries with growing delays, dead letters, error
// completions and graceful drain around every stage's handler (stage.go).
// The four services supply only a Handler; nothing here knows AGN-00x.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// StreamConfig sizes the APTIX stream. Zero values take the defaults.
type StreamConfig struct {
	// Replicas is 1 for a single node, 3 for a cluster.
	Replicas int
	// MaxAge is how long events stay replayable.
	MaxAge time.Duration
	// MaxBytes bounds the stream on disk.
	MaxBytes int64
	// Duplicates is the Nats-Msg-Id de-duplication window: a stage that
	// re-publishes a turn's event within it is ignored by the server.
	Duplicates time.Duration
	// Memory stores the stream in memory (benchmarks only: not durable).
	Memory bool
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 30
	}
	if c.Duplicates <= 0 {
		c.Duplicates = 10 * time.Minute
	}
	return c
}

// JetStreamConfig is the stream definition Provision applies; exported so
// `aptix provision --dry-run` and deploy/nats can print the same thing.
func (c StreamConfig) JetStreamConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	storage := jetstream.FileStorage
	if c.Memory {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        contracts.StreamName,
		Description: "Aptix turn events: every stage's input and output, and dead letters",
		Subjects:    contracts.StreamSubjects(),
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage,
		Replicas:    c.Replicas,
		MaxAge:      c.MaxAge,
		MaxBytes:    c.MaxBytes,
		Duplicates:  c.Duplicates,
		Discard:     jetstream.DiscardOld,
	}
}

// EnsureStream creates or updates the APTIX stream; safe to call from every
// replica of every stage at start. A stream that already has this
// configuration is left alone: every stage starting at once would otherwise
// update it concurrently with the others creating their consumers, which is
// needless work and, in nats-server v2.15.2, a data race the race detector
// reports (fileStore.UpdateConfig vs ConsumerStore).
func EnsureStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, error) {
	want := c.JetStreamConfig()
	if s, err := js.Stream(ctx, want.Name); err == nil && sameStream(s.CachedInfo().Config, want) {
		return s, nil
	}
	s, err := js.CreateOrUpdateStream(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", contracts.StreamName, err)
	}
	return s, nil
}

// sameStream compares what EnsureStream sets.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Storage == want.Storage &&
		max(have.Replicas, 1) == max(want.Replicas, 1) && have.MaxAge == want.MaxAge &&
		have.MaxBytes == want.MaxBytes && have.Duplicates == want.Duplicates &&
		have.Retention == want.Retention && have.Discard == want.Discard && have.Description == want.Description
}

// Durable is the consumer name of a stage: one per stage, shared by its replicas.
func Durable(stage string) string { return "aptix-" + stage }

// ConsumerConfig is the durable consumer a stage reads its input through.
func ConsumerConfig(stage, inStage string, sc SubscriberConfig) jetstream.ConsumerConfig {
	sc = sc.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       Durable(stage),
		Description:   "Aptix " + stage + " stage: consumes aptix." + inStage,
		FilterSubject: contracts.StageFilter(inStage),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       sc.AckWait,
		MaxDeliver:    sc.MaxDeliver,
		MaxAckPending: sc.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// Stages maps each service to the event stage it consumes.
var Stages = []struct{ Name, In, Out string }{
	{"retriever", contracts.StageRequested, contracts.StageRetrieved},
	{"envelope", contracts.StageRetrieved, contracts.StageEnveloped},
	{"llmcaller", contracts.StageEnveloped, contracts.StageResponded},
	{"mapper", contracts.StageResponded, contracts.StageCompleted},
}

// Provision creates the stream and every stage's consumer, for operators who
// manage JetStream objects ahead of the services (`aptix provision`).
func Provision(ctx context.Context, js jetstream.JetStream, c StreamConfig, sc SubscriberConfig) error {
	s, err := EnsureStream(ctx, js, c)
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range Stages {
		if _, err := s.CreateOrUpdateConsumer(ctx, ConsumerConfig(st.Name, st.In, sc)); err != nil {
			errs = append(errs, fmt.Errorf("consumer %s: %w", Durable(st.Name), err))
		}
	}
	return errors.Join(errs...)
}
