package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Trimmer keeps APTIX's history within HistoryMaxAge and HistoryMaxBytes
// (pkg/pipeline/layout's stream.go explains why the server's own limits
// are not used): each pass purges, subject by subject, the oldest events beyond those limits, but
// never an event at or after the first one its stage consumer has not
// acknowledged, and never a completion or dead letter younger than
// CompletionGrace. Purges are idempotent, so every replica may run one.
type Trimmer struct {
	js       jetstream.JetStream
	c        layout.StreamConfig
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
}

// NewTrimmer returns a trimmer of the APTIX stream sized by c.
func NewTrimmer(js jetstream.JetStream, c layout.StreamConfig, log *slog.Logger) *Trimmer {
	if log == nil {
		log = slog.Default()
	}
	c = c.Limits()
	return &Trimmer{js: js, c: c, log: log, interval: c.TrimEvery, now: time.Now}
}

// Run trims every few seconds until ctx ends.
func (tr *Trimmer) Run(ctx context.Context) {
	for {
		// Jitter keeps replicas from trimming in lockstep.
		wait := tr.interval + time.Duration(rand.Int64N(int64(tr.interval/4)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := tr.Trim(ctx); err != nil && ctx.Err() == nil {
			tr.log.Warn("history trim failed", "err", err)
		}
	}
}

// TrimResult says what one pass removed.
type TrimResult struct {
	Purged      uint64
	BytesBefore uint64
	BytesAfter  uint64
}

// Trim runs one pass.
func (tr *Trimmer) Trim(ctx context.Context) (TrimResult, error) {
	var res TrimResult
	s, err := tr.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	st := s.CachedInfo().State
	res.BytesBefore, res.BytesAfter = st.Bytes, st.Bytes
	if st.Msgs == 0 {
		return res, nil
	}
	// History limits as a sequence: everything before cut is beyond them.
	ageCut, err := tr.seqAt(ctx, s, tr.now().Add(-tr.c.HistoryMaxAge), st.FirstSeq, st.LastSeq)
	if err != nil {
		return res, err
	}
	grace, err := tr.seqAt(ctx, s, tr.now().Add(-tr.c.CompletionGrace), st.FirstSeq, st.LastSeq)
	if err != nil {
		return res, err
	}
	// The size cut assumes the oldest events go first; where unfinished
	// work pins part of that range, the cut moves further in rounds until
	// history fits or nothing more may go.
	var errs []error
	step := uint64(0)
	for round := 0; round < 32; round++ {
		cut := ageCut
		if over := int64(st.Bytes) - tr.c.HistoryMaxBytes; over > 0 && st.Msgs > 0 {
			avg := max(int64(st.Bytes/st.Msgs), 1)
			step = max(2*step, uint64((over+avg-1)/avg))
			cut = max(cut, st.FirstSeq+step)
		}
		if cut <= st.FirstSeq {
			break
		}
		for _, p := range tr.plan(ctx, s, cut, grace, ageCut) {
			if p.below <= st.FirstSeq {
				continue
			}
			if err := s.Purge(ctx, jetstream.WithPurgeSubject(p.filter), jetstream.WithPurgeSequence(p.below)); err != nil {
				errs = append(errs, fmt.Errorf("purge %s below %d: %w", p.filter, p.below, err))
			}
		}
		info, err := s.Info(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		res.Purged += st.Msgs - min(st.Msgs, info.State.Msgs) // approximate: new events may arrive meanwhile
		res.BytesAfter = info.State.Bytes
		// A round that purged nothing may have hit only pinned events: the
		// next one reaches further, until the cut passes the last event.
		if int64(info.State.Bytes) <= tr.c.HistoryMaxBytes || cut > st.LastSeq {
			break
		}
		st = info.State
	}
	if err := tr.relieve(ctx, s, &res); err != nil {
		errs = append(errs, err)
	}
	if res.Purged > 0 {
		tr.log.Debug("history trimmed", "purged", res.Purged, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
	}
	return res, errors.Join(errs...)
}

// relieve shortens the completions' grace to PressureGrace while APTIX is
// past its pressure mark. Admission reserves room for a turn by estimate,
// and at_capacity answers take room too, so completions still in their
// CompletionGrace can fill the work room; then a turn already paid could
// not store its result until that grace ran out. Completions older than
// PressureGrace go, oldest first, in growing steps until the stream is back
// under the admission mark; dead letters and completions a durable reader
// (webhooks) has not taken stay.
func (tr *Trimmer) relieve(ctx context.Context, s jetstream.Stream, res *TrimResult) error {
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	st := info.State
	if int64(st.Bytes) <= tr.c.PressureMark() || st.Msgs == 0 {
		return nil
	}
	limit, err := tr.seqAt(ctx, s, tr.now().Add(-tr.c.PressureGrace), st.FirstSeq, st.LastSeq)
	if err != nil {
		return err
	}
	ageCut, err := tr.seqAt(ctx, s, tr.now().Add(-tr.c.HistoryMaxAge), st.FirstSeq, st.LastSeq)
	if err != nil {
		return err
	}
	for _, name := range completionReaders(ctx, s) {
		limit = min(limit, max(tr.floor(ctx, s, name), ageCut))
	}
	before := st
	filter := contracts.StageFilter(contracts.StageCompleted)
	avg := max(int64(st.Bytes/st.Msgs), 1)
	cut := st.FirstSeq
	for int64(st.Bytes) > tr.c.AdmitBelow() && cut < limit {
		over := int64(st.Bytes) - tr.c.AdmitBelow()
		cut = min(limit, cut+uint64((over+avg-1)/avg))
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter), jetstream.WithPurgeSequence(cut)); err != nil {
			return fmt.Errorf("purge %s below %d: %w", filter, cut, err)
		}
		if info, err = s.Info(ctx); err != nil {
			return fmt.Errorf("stream %s: %w", contracts.StreamName, err)
		}
		st = info.State
	}
	purged := before.Msgs - min(before.Msgs, st.Msgs)
	if purged > 0 {
		res.Purged += purged
		res.BytesAfter = st.Bytes
		tr.log.Warn("stream near its cap: completions older than the pressure grace purged",
			"purged", purged, "pressure_grace", tr.c.PressureGrace, "bytes_before", before.Bytes, "bytes_after", st.Bytes)
	}
	return nil
}

type purge struct {
	filter string
	below  uint64
}

// plan bounds each subject's purge by what must stay: a stage's input from
// its first unacknowledged event on, completions and dead letters within
// their grace, and completions a durable reader of them (the gateway's
// webhooks) has yet to take or acknowledge, up to the history age.
func (tr *Trimmer) plan(ctx context.Context, s jetstream.Stream, cut, grace, ageCut uint64) []purge {
	var out []purge
	for _, st := range layout.Stages {
		if contracts.StreamOf(st.In) != contracts.StreamName {
			continue
		}
		out = append(out, purge{contracts.StageFilter(st.In), min(cut, tr.floor(ctx, s, layout.Durable(st.Name)))})
	}
	completed := min(cut, grace)
	for _, name := range completionReaders(ctx, s) {
		completed = min(completed, max(tr.floor(ctx, s, name), ageCut))
	}
	out = append(out,
		purge{contracts.StageFilter(contracts.StageCompleted), completed},
		purge{contracts.DeadPrefix + ".>", min(cut, grace)},
	)
	// Requests left in APTIX by the single-stream layout are history once no
	// consumer there still reads them (layout.DrainOldQueue deletes it when
	// drained).
	if _, err := s.Consumer(ctx, layout.Durable("retriever")); errors.Is(err, jetstream.ErrConsumerNotFound) {
		out = append(out, purge{contracts.StageFilter(contracts.StageRequested), min(cut, grace)})
	}
	return out
}

// completionReaders are the durable consumers that read completions
// (ephemeral and ordered ones, clients awaiting their turns, are not
// waited for: they read a completion as it is stored).
func completionReaders(ctx context.Context, s jetstream.Stream) []string {
	var names []string
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		c := ci.Config
		if c.Durable != "" && (c.FilterSubject == contracts.StageFilter(contracts.StageCompleted) ||
			len(c.FilterSubjects) == 1 && c.FilterSubjects[0] == contracts.StageFilter(contracts.StageCompleted)) {
			names = append(names, ci.Name)
		}
	}
	return names
}

// floor is the first stream sequence a stage consumer may still need. A
// consumer that cannot be read protects everything.
func (tr *Trimmer) floor(ctx context.Context, s jetstream.Stream, durable string) uint64 {
	c, err := s.Consumer(ctx, durable)
	if err != nil {
		return 0
	}
	ci := c.CachedInfo()
	if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.NumRedelivered == 0 {
		// Everything it was handed is done. Not the stream's last + 1: its
		// pending count can lag events stored a moment before (it read 0
		// with 40 new events waiting, and the trim took 7 of them), and
		// what it has not been handed yet lies past Delivered.
		return max(ci.Delivered.Stream, ci.AckFloor.Stream) + 1
	}
	return ci.AckFloor.Stream + 1
}

// seqAt is the first sequence stored at or after t (lastSeq+1 when none):
// a binary search over stored timestamps with "next message at or after
// sequence" gets, about 20 small requests and no consumer to create.
func (tr *Trimmer) seqAt(ctx context.Context, s jetstream.Stream, t time.Time, firstSeq, lastSeq uint64) (uint64, error) {
	lo, hi := firstSeq, lastSeq+1 // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := s.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			hi = mid // nothing stored at or after mid
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339), err)
		}
		if m.Time.Before(t) {
			lo = m.Sequence + 1
		} else {
			hi = mid // nothing stored in [mid, m.Sequence): same cut
		}
	}
	return lo, nil
}
