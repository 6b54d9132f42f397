package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// storedSeqs is every stream's last sequence (events, KV buckets, object
// stores): the server's own count of the messages it has stored, each one
// a durable write (an fsync of its own under APTIX_SYNC=always). Deletes
// and purge markers of KV buckets count too: they are writes as well.
func storedSeqs(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	states, err := streamStates(ctx, js)
	if err != nil {
		return nil, err
	}
	return seqsOf(states), nil
}

// Writes is the durable writes per operation of a run, by stream.
type Writes struct {
	PerOp    float64            `json:"perOp"`
	ByStream map[string]float64 `json:"byStream"`
}

// writesPerOp is the difference of two storedSeqs snapshots over ops.
func writesPerOp(before, after map[string]uint64, ops int) Writes {
	w := Writes{ByStream: map[string]float64{}}
	if ops <= 0 {
		return w
	}
	for name, last := range after {
		if n := last - min(last, before[name]); n > 0 {
			w.ByStream[name] = float64(n) / float64(ops)
			w.PerOp += float64(n) / float64(ops)
		}
	}
	return w
}

// String lists the total and each stream's share, largest first.
func (w Writes) String() string {
	names := make([]string, 0, len(w.ByStream))
	for n := range w.ByStream {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if w.ByStream[a] != w.ByStream[b] {
			if w.ByStream[a] > w.ByStream[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(names) == 0 {
		return fmt.Sprintf("%.2f", w.PerOp)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, w.ByStream[n])
	}
	return fmt.Sprintf("%.2f (%s)", w.PerOp, strings.Join(parts, ", "))
}
