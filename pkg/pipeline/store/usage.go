package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
)

// Usage accounting (docs/usage-and-budgets.md). A completed turn's spend is
// published once on aptix.usage.<principal hash>.<conversation>.<turn> into
// the stream APTIX_USAGE, which keeps one message per subject and refuses a
// second (discard new per subject): the stream itself is the per-turn
// marker, so a redelivered completion is never counted twice, however late.
// One durable consumer with one message in flight folds the turns, in stream
// order, into KV totals per principal and UTC day and month; each totals
// record keeps the sequence of the last turn it holds, so a fold repeated
// after a crash adds nothing. Budgets are checked against those totals by
// every gateway and LLM caller replica: nothing is counted in a process.
const (
	UsageStream  = "APTIX_USAGE"
	UsageBucket  = "aptix_usage"
	UsageSubject = "aptix.usage"
	// UsageFolder is the durable consumer that folds records into totals.
	UsageFolder = "aptix_usage_fold"
)

// usageMaxAge is how long a turn's usage record (the marker) is kept: far
// beyond any redelivery or dead-letter retry, and long enough to rebuild a
// month's totals, while a record (about 400 bytes) per turn stays bounded.
const usageMaxAge = 35 * 24 * time.Hour

// Usage is the accounting store.
type Usage struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	Now func() time.Time
	// folded keeps the totals this process last wrote, with their revision,
	// so the next turn of the same principal and window is one write, not
	// a read and a write: a compare-and-set on that revision still catches
	// another folder's write, which drops the entry and reads again.
	foldMu sync.Mutex
	folded map[string]foldedTotals
}

type foldedTotals struct {
	t   *spend.Totals
	rev uint64
}

// maxFolded bounds the fold's cache (two entries per active principal).
const maxFolded = 4096

// OpenUsage opens the accounting stream, its folding consumer and the
// totals bucket, creating what is missing. What exists is left as it is, so
// a process started with another replica count (the console, a gateway)
// never rescales what provision or the mapper made.
func OpenUsage(ctx context.Context, js jetstream.JetStream, replicas int) (*Usage, error) {
	if _, err := js.Stream(ctx, UsageStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, UsageStreamConfig(replicas))
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("stream %s: %w", UsageStream, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("stream %s: %w", UsageStream, err)
	}
	if _, err := js.Consumer(ctx, UsageStream, UsageFolder); errors.Is(err, jetstream.ErrConsumerNotFound) {
		// One record in flight: the fold relies on stream order.
		_, err = js.CreateConsumer(ctx, UsageStream, UsageConsumerConfig())
		if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
			return nil, fmt.Errorf("consumer %s: %w", UsageFolder, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", UsageFolder, err)
	}
	kv, err := js.KeyValue(ctx, UsageBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: UsageBucket, Description: "Aptix: usage totals per principal and UTC day or month",
			History: 1, Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, UsageBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", UsageBucket, err)
	}
	return &Usage{js: js, kv: kv, Now: time.Now}, nil
}

// UsageStreamConfig is the accounting stream: one message per subject
// (one per turn), a second refused.
func UsageStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: UsageStream, Description: "Aptix: one usage record per completed turn, counted once",
		Subjects: []string{UsageSubject + ".>"}, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
		MaxAge: usageMaxAge, Duplicates: 2 * time.Minute,
	}
}

// UsageConsumerConfig is the folding consumer: one record in flight, since
// the fold relies on stream order.
func UsageConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: UsageFolder, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1,
		AckWait: 30 * time.Second, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// principalToken names a principal in subjects and keys: principals hold
// characters a subject cannot (":" is fine, "." and spaces are not).
func principalToken(p string) string {
	h := sha256.Sum256([]byte(p))
	return hex.EncodeToString(h[:8])
}

// usageKey is the KV key of a principal's totals in a window.
func usageKey(p, window string) string {
	kind := "d"
	if len(window) == 6 {
		kind = "m"
	}
	return kind + "." + principalToken(p) + "." + window
}

// Record accounts one completed turn. A turn key already accounted for the
// principal is accepted and ignored, so a redelivered completion, or a
// mapper replica that crashed after recording, is counted once.
func (u *Usage) Record(ctx context.Context, r spend.Record) error {
	conv, turn, ok := strings.Cut(r.TurnKey, ".")
	if !ok || !contracts.IsToken(conv) || !contracts.IsToken(turn) {
		return fmt.Errorf("usage record: bad turn key %q", r.TurnKey)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("usage record: %w", err)
	}
	subject := UsageSubject + "." + principalToken(r.Principal) + "." + r.TurnKey
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "usage."+principalToken(r.Principal)+"."+r.TurnKey)
	_, err = u.js.PublishMsg(ctx, msg)
	if isSubjectFull(err) {
		return nil // already accounted
	}
	if err != nil {
		return fmt.Errorf("usage record %s: %w", r.TurnKey, err)
	}
	return nil
}

// isSubjectFull reports the refusal of a second record for one turn.
// 10077 is the server's stream store failure, which a full subject is.
func isSubjectFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10077 ||
		strings.Contains(apiErr.Description, "maximum messages per subject exceeded"))
}

// Fold runs the folding consumer until ctx ends: each turn record is added
// to its principal's day and month totals, then acknowledged. Any replica
// of the mapper may run it; the consumer hands out one record at a time.
//
// One pull request asks for many records (the consumer still delivers the
// next only once the last is acknowledged), and the acknowledgement is not
// waited for: a record folded twice adds nothing (the totals keep the
// sequence of the last record they hold). Per record that is the delivery,
// the two totals writes and the ack; a fetch per record and a confirmed
// ack added three messages and a round trip to each.
func (u *Usage) Fold(ctx context.Context, log *slog.Logger) error {
	c, err := u.js.Consumer(ctx, UsageStream, UsageFolder)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", UsageFolder, err)
	}
	for ctx.Err() == nil {
		it, err := c.Messages(jetstream.PullMaxMessages(foldPull), jetstream.PullExpiry(foldExpiry))
		if err != nil {
			log.Warn("usage fold: pull failed", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		stop := context.AfterFunc(ctx, it.Stop)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					log.Warn("usage fold: pull failed", "error", err)
				}
				break
			}
			if err := u.foldOne(ctx, m); err != nil {
				if ctx.Err() != nil {
					break
				}
				log.Warn("usage fold failed; retried", "subject", m.Subject(), "error", err)
				_ = m.NakWithDelay(time.Second)
				continue
			}
			_ = m.Ack()
		}
		stop()
		it.Stop()
	}
	return nil
}

// foldPull is how many records one pull request asks for, and foldExpiry
// how long it stays open.
const (
	foldPull   = 256
	foldExpiry = 30 * time.Second
)

func (u *Usage) foldOne(ctx context.Context, m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return err
	}
	var r spend.Record
	if err := json.Unmarshal(m.Data(), &r); err != nil {
		_ = m.Term() // never foldable; dropping it is all there is to do
		return nil
	}
	seq := md.Sequence.Stream
	added := false
	for _, window := range []string{spend.DayWindow(r.At), spend.MonthWindow(r.At)} {
		ok, err := u.fold(ctx, window, seq, r)
		if err != nil {
			return err
		}
		added = added || ok
	}
	if added {
		observeSpend(ctx, r)
	}
	return nil
}

// fold adds r to one totals record with compare-and-set.
func (u *Usage) fold(ctx context.Context, window string, seq uint64, r spend.Record) (bool, error) {
	key := usageKey(r.Principal, window)
	u.foldMu.Lock()
	defer u.foldMu.Unlock()
	for attempt := 0; attempt < 20; attempt++ {
		c, ok := u.folded[key]
		if !ok {
			c = foldedTotals{t: &spend.Totals{Principal: r.Principal, Window: window}}
			e, err := u.kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				return false, err
			default:
				c.rev = e.Revision()
				if err := json.Unmarshal(e.Value(), c.t); err != nil {
					return false, fmt.Errorf("usage totals %s: %w", key, err)
				}
			}
		}
		// Fold changes the cached totals: they stay cached only once stored.
		delete(u.folded, key)
		if !c.t.Fold(seq, r) {
			u.remember(key, c)
			return false, nil
		}
		b, err := json.Marshal(c.t)
		if err != nil {
			return false, err
		}
		var rev uint64
		if c.rev == 0 {
			rev, err = u.kv.Create(ctx, key, b)
		} else {
			rev, err = u.kv.Update(ctx, key, b, c.rev)
		}
		if err == nil {
			u.remember(key, foldedTotals{t: c.t, rev: rev})
			return true, nil
		}
		if !casConflict(err) {
			return false, err
		}
	}
	return false, fmt.Errorf("usage totals %s: too much contention", key)
}

// remember caches what fold stored (or found already counted) under key.
func (u *Usage) remember(key string, c foldedTotals) {
	if u.folded == nil || len(u.folded) >= maxFolded {
		u.folded = map[string]foldedTotals{}
	}
	u.folded[key] = c
}

func casConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}

// Totals reads a principal's totals in a window (zero when none).
func (u *Usage) Totals(ctx context.Context, principal, window string) (spend.Totals, error) {
	t := spend.Totals{Principal: principal, Window: window}
	e, err := u.kv.Get(ctx, usageKey(principal, window))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("usage totals: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return t, fmt.Errorf("usage totals: %w", err)
	}
	return t, nil
}

// Check returns the budget of principal with no room left at now (spent
// plus held ≥ budget), or nil.
func (u *Usage) Check(ctx context.Context, principal string, budgets []contracts.Budget) (*spend.Refusal, error) {
	if len(budgets) == 0 {
		return nil, nil
	}
	return spend.Check(budgets, u.Now(), func(window string) (spend.Totals, error) {
		return u.Totals(ctx, principal, window)
	})
}

// Reserve holds h under id (a call key) in each window principal's
// budgets count in, or returns the budget it would overrun and holds
// nothing. Each window is one compare-and-set on the totals record the
// fold writes too, so two replicas admitting calls at once, or a fold
// between a read and a write, make one of the writes read again: no call
// is admitted against holds or spend it did not see. Reserving an id again
// renews its hold (a redelivered call) instead of adding a second.
func (u *Usage) Reserve(ctx context.Context, principal string, budgets []contracts.Budget, id string, h spend.Hold) (*spend.Refusal, error) {
	now := u.Now()
	var done []string
	for _, w := range spend.Windows(budgets, now) {
		var refusal *spend.Refusal
		err := u.update(ctx, principal, w.Window, func(t *spend.Totals) bool {
			var changed bool
			refusal, changed = t.Reserve(id, h, w.Budgets, now, w.Reset)
			return changed
		})
		if err == nil && refusal == nil {
			done = append(done, w.Window)
			continue
		}
		for _, window := range done { // refused by a later window: hold nothing
			if rerr := u.update(ctx, principal, window, func(t *spend.Totals) bool { return t.Release(id, now) }); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reserve %s for %q: %w", id, principal, err)
		}
		return refusal, nil
	}
	return nil, nil
}

// Settle replaces the hold under id with the call's real cost.
func (u *Usage) Settle(ctx context.Context, principal string, budgets []contracts.Budget, id string, real spend.Hold) error {
	now := u.Now()
	for _, w := range spend.Windows(budgets, now) {
		if err := u.update(ctx, principal, w.Window, func(t *spend.Totals) bool { return t.Settle(id, real, now) }); err != nil {
			return fmt.Errorf("settle %s for %q: %w", id, principal, err)
		}
	}
	return nil
}

// Release drops the hold under id: the call was not paid.
func (u *Usage) Release(ctx context.Context, principal string, budgets []contracts.Budget, id string) error {
	now := u.Now()
	for _, w := range spend.Windows(budgets, now) {
		if err := u.update(ctx, principal, w.Window, func(t *spend.Totals) bool { return t.Release(id, now) }); err != nil {
			return fmt.Errorf("release %s for %q: %w", id, principal, err)
		}
	}
	return nil
}

// update applies change to a totals record with compare-and-set, reading
// again after another writer's write; change reports whether to write.
func (u *Usage) update(ctx context.Context, principal, window string, change func(*spend.Totals) bool) error {
	key := usageKey(principal, window)
	for attempt := 0; attempt < 50; attempt++ {
		t := spend.Totals{Principal: principal, Window: window}
		var rev uint64
		e, err := u.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				return fmt.Errorf("usage totals %s: %w", key, err)
			}
		}
		if !change(&t) {
			return nil
		}
		b, err := json.Marshal(&t)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = u.kv.Create(ctx, key, b)
		} else {
			_, err = u.kv.Update(ctx, key, b, rev)
		}
		if err == nil || !casConflict(err) {
			return err
		}
		// Many calls of one principal at once contend for its record: a
		// random pause, growing with the attempts, spreads them out.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(attempt+1) * int64(time.Millisecond)))):
		}
	}
	return fmt.Errorf("usage totals %s: too much contention", key)
}

// Report sums the day totals f selects.
func (u *Usage) Report(ctx context.Context, f spend.Filter) (spend.Report, error) {
	prefix := "d."
	if !f.All {
		prefix += principalToken(f.Principal) + "."
	}
	var days []spend.Totals
	lister, err := u.kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return spend.Report{}, fmt.Errorf("usage: %w", err)
	}
	if lister != nil {
		for key := range lister.Keys() {
			window := key[strings.LastIndexByte(key, '.')+1:]
			if (f.From != "" && window < f.From) || (f.To != "" && window > f.To) {
				continue
			}
			e, err := u.kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return spend.Report{}, fmt.Errorf("usage %s: %w", key, err)
			}
			var t spend.Totals
			if json.Unmarshal(e.Value(), &t) == nil {
				days = append(days, t)
			}
		}
	}
	return spend.Sum(days, f), nil
}

// Pending is how many turn records the folder has not yet added to the
// totals (a report is exact once it is 0). The consumer's own count lags a
// publish (the server signals its consumers from a queue), so a record
// stored but not yet counted there still shows as the gap between the
// stream's last sequence and the folder's ack floor.
func (u *Usage) Pending(ctx context.Context) (uint64, error) {
	c, err := u.js.Consumer(ctx, UsageStream, UsageFolder) // reads its info: CachedInfo is now
	if err != nil {
		return 0, fmt.Errorf("usage pending: %w", err)
	}
	s, err := u.js.Stream(ctx, UsageStream) // after the consumer: a record between the two counts, never one less
	if err != nil {
		return 0, fmt.Errorf("usage pending: %w", err)
	}
	info, st := c.CachedInfo(), s.CachedInfo()
	return unfolded(info.NumPending+uint64(info.NumAckPending), st.State.FirstSeq, st.State.LastSeq, info.AckFloor.Stream), nil
}

// unfolded is the larger of the consumer's count and the records stored
// after its ack floor; records that aged out before the floor (first > floor)
// are not waiting for anyone.
func unfolded(counted, first, last, floor uint64) uint64 {
	if first > 0 {
		floor = max(floor, first-1)
	}
	if last <= floor {
		return counted
	}
	return max(counted, last-floor)
}

// observeSpend counts a folded turn's cost and tokens once, with the GenAI
// attributes of its model.
func observeSpend(ctx context.Context, r spend.Record) {
	m := spendMeters()
	attrs := metric.WithAttributes(attribute.String("gen_ai.provider.name", r.Backend), attribute.String("gen_ai.request.model", r.Model))
	if r.Cost.Unpriced {
		m.unpriced.Add(ctx, 1, attrs)
		return
	}
	m.cost.Add(ctx, r.Cost.Total, attrs)
}

// spendInstruments are the fold's counters, created once from the global
// meter provider in the pipeline's scope, as the stage runtime's are.
type spendInstruments struct {
	unpriced metric.Int64Counter
	cost     metric.Float64Counter
}

var (
	spendOnce sync.Once
	spendInst spendInstruments
)

func spendMeters() *spendInstruments {
	spendOnce.Do(func() {
		m := otel.Meter(tracing.Name)
		spendInst.cost, _ = m.Float64Counter("aptix.usage.cost", metric.WithUnit("{USD}"),
			metric.WithDescription("Cost of completed turns at the profile's prices, counted once per turn"))
		spendInst.unpriced, _ = m.Int64Counter("aptix.usage.unpriced_turns", metric.WithUnit("{turn}"),
			metric.WithDescription("Completed turns whose model has no price"))
	})
	return &spendInst
}
