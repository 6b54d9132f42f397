// Package layout is the bus layout every Aptix process agrees on: the
// APTIX_QUEUE and APTIX streams and their limits (StreamConfig,
// EnsureStream), the declared stages (Stages) and the durable consumer
// names they read through, the move from the single-stream layout, and the
// size and age parsers the limits are written with. The stage runtime
// (pkg/pipeline) imports it; it imports no part of the runtime.
package layout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Retention design (docs/architecture.md#work-is-not-history): work is not history.
//
// A limits stream with discard "old" deletes its oldest events when full
// whether or not a stage has processed them: an accepted turn vanishes
// without an error, a dead letter or a completion. So:
//
//   - Requests (aptix.requested.>) go to APTIX_QUEUE, a work-queue stream
//     with discard "new" and a hard cap (QueueMaxBytes): a request leaves it
//     only when the retriever acknowledges it, and when it is full a client's
//     publish is refused (backpressure.ErrAtCapacity), loudly, never dropped.
//   - Every later event goes to APTIX: limits retention, discard "new", no
//     server-side age limit, and a hard cap of WorkMaxBytes+HistoryMaxBytes.
//     History is bounded by the trimmer (pkg/pipeline's trim.go), which purges by age
//     (HistoryMaxAge) and size (HistoryMaxBytes) but never an event at or
//     after the first one a stage has not acknowledged, and never a
//     completion or dead letter younger than CompletionGrace.
//   - Only the first stage brings new turns into APTIX, and it does so only
//     while APTIX has headroom (pkg/pipeline's capacity.go); every other stage's publish moves
//     a turn already inside. A stage whose publish is refused retries with
//     backoff and never acknowledges its input first, so nothing is lost and
//     a full stream is backpressure, up to the client's refused publish.
//
// Options weighed: an interest-retention work stream with history sourced
// from it does not work on nats-server 2.15 (a source consumer is not
// interest: an event no stage consumes, a completion, is deleted before it is
// sourced); one discard-new stream for everything deadlocks when clients fill
// it (no stage can publish its output); a work-queue stream cannot be read by
// the ordered consumers clients use to await completions. The queue keeps
// that deadlock out of APTIX: clients can fill only the queue.

// StreamConfig sizes the APTIX_QUEUE and APTIX streams. Zero values take the
// defaults; the Env* variables (env.go) set them for every process.
type StreamConfig struct {
	// Replicas is 1 for a single node, 3 for a cluster.
	Replicas int
	// QueueMaxBytes caps requests not yet taken by the retriever: past it a
	// client's publish is refused (APTIX_QUEUE_MAX_BYTES, default 256 MiB).
	QueueMaxBytes int64
	// WorkMaxBytes is APTIX's room for turns inside the pipeline, beyond
	// history (APTIX_WORK_MAX_BYTES, default 1 GiB).
	WorkMaxBytes int64
	// HistoryMaxBytes bounds finished events kept for replay and inspection
	// (APTIX_HISTORY_MAX_BYTES, default 2 GiB).
	HistoryMaxBytes int64
	// HistoryMaxAge is how long finished events stay replayable
	// (APTIX_HISTORY_MAX_AGE, default 7 days).
	HistoryMaxAge time.Duration
	// CompletionGrace keeps completions and dead letters at least this long
	// whatever the size limit says, so a client can read its result
	// (APTIX_COMPLETION_GRACE, default 10 minutes).
	CompletionGrace time.Duration
	// PressureGrace is the shorter grace a completion keeps when APTIX is
	// nearly full of them (past PressureMark): admission reserves room by
	// estimate, so a burst of small turns can fill the work room with
	// completions still in their CompletionGrace, and then turns already
	// paid could not store their results. Default: CompletionGrace, at
	// most 1 minute. Dead letters always keep CompletionGrace.
	PressureGrace time.Duration
	// AdmitTimeout bounds how long the first stage holds a queued request
	// for room in APTIX before it answers the turn with a CodeAtCapacity
	// error completion (APTIX_ADMIT_TIMEOUT, default 2 minutes): an accepted
	// turn is answered in bounded time whatever the limits.
	AdmitTimeout time.Duration
	// TrimEvery is how often the trimmer runs (default 5 s).
	TrimEvery time.Duration
	// Duplicates is the Nats-Msg-Id de-duplication window: a stage that
	// re-publishes a turn's event within it is ignored by the server
	// (APTIX_DEDUP_WINDOW, default 10 minutes, at least 100ms). Nothing
	// depends on its length for isolation: every id names its conversation
	// and turn (contracts.MsgID), so tests shorten it to cross it quickly.
	Duplicates time.Duration
	// Memory stores the streams in memory (benchmarks only: not durable).
	Memory bool
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.QueueMaxBytes <= 0 {
		c.QueueMaxBytes = 256 << 20
	}
	if c.WorkMaxBytes <= 0 {
		c.WorkMaxBytes = 1 << 30
	}
	if c.HistoryMaxBytes <= 0 {
		c.HistoryMaxBytes = 2 << 30
	}
	if c.HistoryMaxAge <= 0 {
		c.HistoryMaxAge = 7 * 24 * time.Hour
	}
	if c.CompletionGrace <= 0 {
		c.CompletionGrace = 10 * time.Minute
	}
	if c.PressureGrace <= 0 || c.PressureGrace > c.CompletionGrace {
		c.PressureGrace = min(c.CompletionGrace, time.Minute)
	}
	if c.Duplicates <= 0 {
		c.Duplicates = 10 * time.Minute
	}
	if c.TrimEvery <= 0 {
		c.TrimEvery = 5 * time.Second
	}
	if c.AdmitTimeout <= 0 {
		c.AdmitTimeout = 2 * time.Minute
	}
	return c
}

// StreamConfigFromEnv reads the limits every Aptix process applies.
func StreamConfigFromEnv() (StreamConfig, error) {
	var c StreamConfig
	var errs []error
	c.Replicas = IntFromEnv(EnvReplicas)
	for _, b := range []struct {
		key string
		dst *int64
	}{{EnvQueueMaxBytes, &c.QueueMaxBytes}, {EnvWorkMaxBytes, &c.WorkMaxBytes}, {EnvHistoryMaxBytes, &c.HistoryMaxBytes}} {
		if v := os.Getenv(b.key); v != "" {
			n, err := ParseBytes(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", b.key, err))
			}
			*b.dst = n
		}
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{EnvHistoryMaxAge, &c.HistoryMaxAge}, {EnvCompletionGrace, &c.CompletionGrace}, {EnvAdmitTimeout, &c.AdmitTimeout}} {
		if v := os.Getenv(d.key); v != "" {
			n, err := ParseAge(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.key, err))
			}
			*d.dst = n
		}
	}
	var err error
	if c.Duplicates, err = DedupWindowFromEnv(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// minDedupWindow is the shortest window nats-server accepts.
const minDedupWindow = 100 * time.Millisecond

// DedupWindowFromEnv reads APTIX_DEDUP_WINDOW (e.g. 10m, 2h, 1d): 0 when it
// is unset (the default applies), an error when it is no duration or
// shorter than the 100ms nats-server accepts. StreamConfigFromEnv reads it,
// and so does the in-process stack of `aptix up` and the tests.
func DedupWindowFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvDedupWindow)
	if v == "" {
		return 0, nil
	}
	d, err := ParseAge(v)
	if err == nil && d < minDedupWindow {
		err = fmt.Errorf("%v is shorter than the %v JetStream accepts", d, minDedupWindow)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", EnvDedupWindow, err)
	}
	return d, nil
}

// Limits returns the configuration with every default applied: what the
// streams are made with, what the runtime applies, and what status prints.
func (c StreamConfig) Limits() StreamConfig { return c.withDefaults() }

// AdmitBelow is the mark under which the first stage may bring a new turn
// in, counting the events every turn inside will still add (admission):
// half the work room stays free beyond that for events larger than the
// estimate, tool rounds, and error completions.
func (c StreamConfig) AdmitBelow() int64 {
	c = c.withDefaults()
	return c.HistoryMaxBytes + c.WorkMaxBytes/2
}

// PressureMark is the size past which the trimmer shortens the completions'
// grace to PressureGrace (pipeline.Trimmer.relieve): an eighth of the work room
// before the stream's hard cap, which leaves every turn inside room to
// finish while completions in their grace age out.
func (c StreamConfig) PressureMark() int64 {
	c = c.withDefaults()
	return c.HistoryMaxBytes + c.WorkMaxBytes - c.WorkMaxBytes/8
}

// JetStreamConfig is the APTIX definition EnsureStreams applies; exported so
// `aptix provision --dry-run` and deploy/nats can print the same thing.
func (c StreamConfig) JetStreamConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	return jetstream.StreamConfig{
		Name:        contracts.StreamName,
		Description: "Aptix turn events after the request: every stage's input and output, completions and dead letters; history trimmed by Aptix, never unfinished work",
		Subjects:    contracts.StreamSubjects(),
		Retention:   jetstream.LimitsPolicy,
		Storage:     c.storage(),
		Replicas:    c.Replicas,
		MaxBytes:    c.WorkMaxBytes + c.HistoryMaxBytes,
		Duplicates:  c.Duplicates,
		Discard:     jetstream.DiscardNew,
		AllowDirect: true,
	}
}

// QueueJetStreamConfig is the APTIX_QUEUE definition: requests until the
// retriever takes them.
func (c StreamConfig) QueueJetStreamConfig() jetstream.StreamConfig {
	c = c.withDefaults()
	return jetstream.StreamConfig{
		Name:        contracts.QueueStreamName,
		Description: "Aptix requests not yet taken by the retriever; full means clients are refused",
		Subjects:    contracts.QueueSubjects(),
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     c.storage(),
		Replicas:    c.Replicas,
		MaxBytes:    c.QueueMaxBytes,
		Duplicates:  c.Duplicates,
		Discard:     jetstream.DiscardNew,
	}
}

func (c StreamConfig) storage() jetstream.StorageType {
	if c.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// EnsureStream creates or updates APTIX_QUEUE and APTIX (migrating a
// deployment from the single-stream layout, see migrate.go) and returns
// APTIX; safe to call from every replica of every stage at start. A stream
// that already has its configuration is left alone: every stage starting at
// once would otherwise update it concurrently with the others creating their
// consumers, which is needless work and, in nats-server v2.15.2, a data race
// the race detector reports (fileStore.UpdateConfig vs ConsumerStore).
func EnsureStream(ctx context.Context, js jetstream.JetStream, c StreamConfig) (jetstream.Stream, error) {
	if err := migrateSingleStream(ctx, js, c); err != nil {
		return nil, err
	}
	if _, err := ensureOne(ctx, js, c.QueueJetStreamConfig()); err != nil {
		return nil, err
	}
	return ensureOne(ctx, js, c.JetStreamConfig())
}

func ensureOne(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	if s, err := js.Stream(ctx, want.Name); err == nil && sameStream(s.CachedInfo().Config, want) {
		return s, nil
	}
	s, err := js.CreateOrUpdateStream(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
	}
	return s, nil
}

// sameStream compares what EnsureStream sets.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Storage == want.Storage &&
		max(have.Replicas, 1) == max(want.Replicas, 1) && have.MaxAge == want.MaxAge &&
		have.MaxBytes == want.MaxBytes && have.Duplicates == want.Duplicates &&
		have.Retention == want.Retention && have.Discard == want.Discard && have.Description == want.Description &&
		have.AllowDirect == want.AllowDirect
}

// Durable is the consumer name of a stage: one per stage, shared by its replicas.
func Durable(stage string) string { return "aptix-" + stage }
