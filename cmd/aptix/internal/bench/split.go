package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Split is the durable writes per turn of a sample of sequential turns at
// concurrency 1, cut at the turn's answer: those stored before it are the
// turn's critical path (the answer could not reach the client sooner), those
// stored after it are writes the turn's answer did not wait for.
type Split struct {
	Turns int `json:"turns"`
	// Before and After are per turn, by stream (KV_* and OBJ_* included).
	Before Writes `json:"beforeAnswer"`
	After  Writes `json:"afterAnswer"`
	// MinBefore and MaxBefore are the fewest and most writes one turn of
	// the sample stored before its answer.
	MinBefore int `json:"minBeforeAnswer"`
	MaxBefore int `json:"maxBeforeAnswer"`
	// MedianBefore is the median turn's writes before its answer: what the
	// goal judges, since a background writer that runs on a clock, not per
	// turn (the queue's keeper, once a second), lands in one turn's window
	// now and then and moves the mean, not the median.
	MedianBefore int `json:"medianBeforeAnswer"`
	// Unsettled counts the turns whose streams were still growing when the
	// wait for them to settle gave up: their after figure may be short.
	Unsettled int `json:"unsettled,omitempty"`
}

// turnSnapshots are every stream's last sequence right before a turn was
// submitted, at its answer, and once its writes had stopped.
type turnSnapshots struct {
	start, answer, settled map[string]uint64
}

// splitWrites sums what each turn stored before and after its answer. A
// stream missing from a snapshot (created later) counts from 0 in start and
// as not yet written at the answer; an answer sequence outside start..settled
// is clamped, so no write is counted twice or lost.
func splitWrites(turns []turnSnapshots) Split {
	s := Split{Turns: len(turns), Before: Writes{ByStream: map[string]float64{}}, After: Writes{ByStream: map[string]float64{}}}
	if len(turns) == 0 {
		return s
	}
	before, after := map[string]uint64{}, map[string]uint64{}
	counts := make([]int, 0, len(turns))
	for i, t := range turns {
		var n int
		for name, last := range t.settled {
			from := min(t.start[name], last)
			cut, ok := t.answer[name]
			if !ok {
				cut = from
			}
			cut = min(max(cut, from), last)
			before[name] += cut - from
			after[name] += last - cut
			n += int(cut - from)
		}
		if i == 0 || n < s.MinBefore {
			s.MinBefore = n
		}
		s.MaxBefore = max(s.MaxBefore, n)
		counts = append(counts, n)
	}
	slices.Sort(counts)
	s.MedianBefore = counts[len(counts)/2]
	per := func(sum map[string]uint64, w *Writes) {
		for name, n := range sum {
			if n > 0 {
				w.ByStream[name] = float64(n) / float64(len(turns))
				w.PerOp += float64(n) / float64(len(turns))
			}
		}
	}
	per(before, &s.Before)
	per(after, &s.After)
	return s
}

// String is the split as the table prints it.
func (s Split) String() string {
	return fmt.Sprintf("%s before the answer + %s after it (%d sequential turns; %d to %d before the answer per turn, median %d)",
		s.Before, s.After, s.Turns, s.MinBefore, s.MaxBefore, s.MedianBefore)
}

// streamState is a stream's last sequence and its last message's time.
type streamState struct {
	seq  uint64
	last time.Time
}

// streamStates is every stream's state, from the account's stream listing:
// one request for up to 256 streams.
func streamStates(ctx context.Context, js jetstream.JetStream) (map[string]streamState, error) {
	states := map[string]streamState{}
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		states[si.Config.Name] = streamState{seq: si.State.LastSeq, last: si.State.LastTime}
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return states, nil
}

func seqsOf(states map[string]streamState) map[string]uint64 {
	seqs := make(map[string]uint64, len(states))
	for name, st := range states {
		seqs[name] = st.seq
	}
	return seqs
}

// cutAt is the answer snapshot lowered to the messages stored by cut. The
// listing is a round trip taken after the answer, so a write stored in the
// meantime would otherwise count as before it: each stream whose last
// message is younger than cut is read back from its top (the server's own
// timestamps) down to the first message stored by cut. A message gone by
// then (a KV value its key's next write replaced) has no time to read: the
// walk stops there and counts it as before the answer, never fewer.
func cutAt(ctx context.Context, js jetstream.JetStream, start map[string]uint64, answer map[string]streamState, cut time.Time) (map[string]uint64, error) {
	seqs := seqsOf(answer)
	for name, st := range answer {
		if !st.last.After(cut) || st.seq <= start[name] {
			continue
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		for q := st.seq; q > start[name]; q-- {
			m, err := s.GetMsg(ctx, q)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read %s message %d: %w", name, q, err)
			}
			if !m.Time.After(cut) {
				break
			}
			seqs[name] = q - 1
		}
	}
	return seqs, nil
}

// settle waits until no stream has grown for quiet (polling the listing),
// at most bound; it reports whether the streams did settle.
func settle(ctx context.Context, js jetstream.JetStream, quiet, bound time.Duration) (map[string]uint64, bool, error) {
	states, err := streamStates(ctx, js)
	if err != nil {
		return nil, false, err
	}
	prev := seqsOf(states)
	begin, still := time.Now(), time.Now()
	for time.Since(begin) < bound {
		time.Sleep(10 * time.Millisecond)
		states, err := streamStates(ctx, js)
		if err != nil {
			return nil, false, err
		}
		cur := seqsOf(states)
		if !maps.Equal(cur, prev) {
			prev, still = cur, time.Now()
			continue
		}
		if time.Since(still) >= quiet {
			return cur, true, nil
		}
	}
	return prev, false, nil
}

// sampleSplit runs n turns one after another, each between snapshots of
// every stream, outside any timed run. turn runs turn i and returns, once the
// client holds the answer, how to find the answer's time.
func sampleSplit(ctx context.Context, js jetstream.JetStream, n int, turn func(ctx context.Context, i int) (func(context.Context) (time.Time, error), error)) (Split, error) {
	const quiet, bound = 100 * time.Millisecond, 2 * time.Second
	snaps := make([]turnSnapshots, 0, n)
	var unsettled int
	// What ran before (the latency run's last turns, their records written
	// after the answer) must not land in the first turn's count.
	if _, _, err := settle(ctx, js, quiet, bound); err != nil {
		return Split{}, err
	}
	for i := range n {
		start, err := streamStates(ctx, js)
		if err != nil {
			return Split{}, err
		}
		answered, err := turn(ctx, i)
		if err != nil {
			return Split{}, fmt.Errorf("turn %d of the write split: %w", i, err)
		}
		answer, err := streamStates(ctx, js)
		if err != nil {
			return Split{}, err
		}
		// Cut before waiting: a KV value read back now is less likely to
		// have been replaced by its key's next write.
		at, err := answered(ctx)
		if err != nil {
			return Split{}, err
		}
		t := turnSnapshots{start: seqsOf(start)}
		if t.answer, err = cutAt(ctx, js, t.start, answer, at); err != nil {
			return Split{}, err
		}
		settled, ok, err := settle(ctx, js, quiet, bound)
		if err != nil {
			return Split{}, err
		}
		if !ok {
			unsettled++
		}
		t.settled = settled
		snaps = append(snaps, t)
	}
	s := splitWrites(snaps)
	s.Unsettled = unsettled
	return s, nil
}
