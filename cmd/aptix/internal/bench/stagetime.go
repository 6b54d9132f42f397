package bench

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// stageBusy reads each stage's handled events and total handling time from
// its micro service stats: the difference over a phase says where a turn's
// time goes (the handler, its store round trips and its publish; not the
// bus between stages).
func stageBusy(nc *nats.Conn) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, name := range layout.MainNames() {
		m, err := nc.Request("$SRV.STATS.aptix-"+name, nil, 2*time.Second)
		if err != nil {
			continue
		}
		var s micro.Stats
		if json.Unmarshal(m.Data, &s) != nil || len(s.Endpoints) == 0 {
			continue
		}
		out[name] = [2]float64{float64(s.Endpoints[0].NumRequests), float64(s.Endpoints[0].ProcessingTime)}
	}
	return out
}

// stageMs is the mean handling time per event of each stage between two
// stageBusy readings, in milliseconds.
func stageMs(before, after map[string][2]float64) map[string]float64 {
	ms := map[string]float64{}
	for name, a := range after {
		b := before[name]
		if n := a[0] - b[0]; n > 0 {
			ms[name] = round3((a[1] - b[1]) / n / 1e6)
		}
	}
	return ms
}
