package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// The consumers live with the runtime, not with the layout: their ack wait,
// deliveries and concurrency are the subscriber's settings (SubscriberConfig).

// ConsumerConfig is the durable consumer a stage reads its input through.
func ConsumerConfig(stage, inStage string, sc SubscriberConfig) jetstream.ConsumerConfig {
	sc = sc.withDefaults()
	if isLocal(Stage{Name: stage}) {
		// As the stage itself sets it (Run): provision must not undo it.
		sc.MaxAckPending = min(sc.MaxAckPending, LocalMaxAckPending)
	}
	return jetstream.ConsumerConfig{
		Durable:       layout.Durable(stage),
		Description:   "Aptix " + stage + " stage: consumes aptix." + inStage + " from " + contracts.StreamOf(inStage),
		FilterSubject: contracts.StageFilter(inStage),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       sc.AckWait,
		MaxDeliver:    sc.MaxDeliver,
		MaxAckPending: sc.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// Provision creates the streams and every stage's consumer, for operators who
// manage JetStream objects ahead of the services (`aptix provision`).
func Provision(ctx context.Context, js jetstream.JetStream, c layout.StreamConfig, sc SubscriberConfig) error {
	_, err := ProvisionStages(ctx, js, c, sc)
	return err
}

// ProvisionStages is Provision returning the durable consumers it created
// or updated, one per declared stage (layout.Stages), so what `aptix provision`
// prints is what it made.
func ProvisionStages(ctx context.Context, js jetstream.JetStream, c layout.StreamConfig, sc SubscriberConfig) ([]string, error) {
	if _, err := layout.EnsureStream(ctx, js, c); err != nil {
		return nil, err
	}
	var made []string
	var errs []error
	for _, st := range layout.Stages {
		stream, durable := st.Consumer()
		if _, err := js.CreateOrUpdateConsumer(ctx, stream, ConsumerConfig(st.Name, st.In, sc)); err != nil {
			errs = append(errs, fmt.Errorf("consumer %s: %w", durable, err))
			continue
		}
		made = append(made, durable)
	}
	return made, errors.Join(errs...)
}

// drainOldQueueInBackground is started by the stage that consumes requests
// (the retriever): only it may publish them everywhere (deploy/nats/auth.conf),
// and another stage fetching the old consumer's requests would only spend
// their deliveries.
func drainOldQueueInBackground(ctx context.Context, js jetstream.JetStream, log *slog.Logger) {
	if _, err := js.Consumer(ctx, contracts.StreamName, layout.Durable("retriever")); err != nil {
		return
	}
	go func() {
		if _, err := layout.DrainOldQueue(context.WithoutCancel(ctx), js, 10*time.Minute); err != nil {
			log.Warn("moving requests from the single-stream layout failed; the next start retries", "err", err)
		}
	}()
}
