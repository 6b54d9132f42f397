package pipeline

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// A stage answers the NATS micro protocol ($SRV.PING|INFO|STATS) itself:
// nats.go's micro package counts only requests to its own endpoints, so
// `nats micro stats aptix-<stage>` showed the status endpoint's calls, never
// the events the stage processed. Here the "process" endpoint's counters are
// the stage's own: requests = events handled to an end (processed, rejected,
// dead-lettered), errors = rejected + dead-lettered, with the handlers' time.

// workStats is what the process endpoint reports.
type workStats struct {
	processed, rejected, retried, dead atomic.Int64
	busyNanos                          atomic.Int64
	mu                                 sync.Mutex
	lastError                          string
}

func (w *workStats) fail(reason string) {
	w.mu.Lock()
	w.lastError = reason
	w.mu.Unlock()
}

// microService is one stage's micro identity and its subscriptions.
type microService struct {
	id      micro.ServiceIdentity
	desc    string
	started time.Time
	process micro.EndpointInfo
	status  micro.EndpointInfo
	stats   *workStats
	counts  func() map[string]int64
	subs    []*nats.Subscription
}

func startMicro(nc *nats.Conn, st Stage, durable string, stats *workStats, counts func() map[string]int64) (*microService, error) {
	name := "aptix-" + st.Name
	m := &microService{
		id: micro.ServiceIdentity{Name: name, ID: nuid.Next(), Version: Version,
			Metadata: map[string]string{"consumes": contracts.StageFilter(st.In), "durable": durable}},
		desc:    "Aptix " + st.Name + " stage: aptix." + st.In + " → aptix." + st.Out,
		started: time.Now().UTC(),
		process: micro.EndpointInfo{Name: "process", Subject: contracts.StageFilter(st.In), QueueGroup: durable,
			Metadata: map[string]string{"stream": contracts.StreamOf(st.In)}},
		status: micro.EndpointInfo{Name: "status", Subject: "aptix.svc." + st.Name + ".status", QueueGroup: "q"},
		stats:  stats, counts: counts,
	}
	handlers := map[string]nats.MsgHandler{
		"PING":  func(msg *nats.Msg) { m.reply(msg, micro.Ping{ServiceIdentity: m.id, Type: micro.PingResponseType}) },
		"INFO":  func(msg *nats.Msg) { m.reply(msg, m.info()) },
		"STATS": func(msg *nats.Msg) { m.reply(msg, m.statsReply()) },
	}
	for verb, h := range handlers {
		for _, subj := range []string{"$SRV." + verb, "$SRV." + verb + "." + name, "$SRV." + verb + "." + name + "." + m.id.ID} {
			sub, err := nc.Subscribe(subj, h)
			if err != nil {
				m.stop()
				return nil, fmt.Errorf("micro %s: %w", subj, err)
			}
			m.subs = append(m.subs, sub)
		}
	}
	sub, err := nc.QueueSubscribe(m.status.Subject, m.status.QueueGroup, func(msg *nats.Msg) { m.reply(msg, counts()) })
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("micro %s: %w", m.status.Subject, err)
	}
	m.subs = append(m.subs, sub)
	return m, nil
}

func (m *microService) reply(msg *nats.Msg, v any) {
	if data, err := json.Marshal(v); err == nil {
		_ = msg.Respond(data)
	}
}

func (m *microService) info() micro.Info {
	return micro.Info{ServiceIdentity: m.id, Type: micro.InfoResponseType, Description: m.desc,
		Endpoints: []micro.EndpointInfo{m.process, m.status}}
}

func (m *microService) statsReply() micro.Stats {
	w := m.stats
	handled := int(w.processed.Load() + w.rejected.Load() + w.dead.Load())
	errs := int(w.rejected.Load() + w.dead.Load())
	busy := time.Duration(w.busyNanos.Load())
	var avg time.Duration
	if handled > 0 {
		avg = busy / time.Duration(handled)
	}
	w.mu.Lock()
	last := w.lastError
	w.mu.Unlock()
	data, _ := json.Marshal(m.counts())
	return micro.Stats{ServiceIdentity: m.id, Type: micro.StatsResponseType, Started: m.started, Endpoints: []*micro.EndpointStats{{
		Name: m.process.Name, Subject: m.process.Subject, QueueGroup: m.process.QueueGroup,
		NumRequests: handled, NumErrors: errs, LastError: last, ProcessingTime: busy, AverageProcessingTime: avg, Data: data,
	}}}
}

func (m *microService) stop() {
	for _, s := range m.subs {
		_ = s.Unsubscribe()
	}
}

// MicroReplicas pings every micro service on nc and counts the replicas of
// each service name that answer within wait (what `nats micro ls` shows).
// With quiet > 0 it stops once no answer came for quiet, so a caller on a
// latency budget (the console's overview) does not wait the whole interval
// when every replica answered at once.
func MicroReplicas(nc *nats.Conn, wait, quiet time.Duration) (map[string]int, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("micro discovery: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		return nil, fmt.Errorf("micro discovery: %w", err)
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	for deadline := time.Now().Add(wait); ; {
		left := time.Until(deadline)
		if quiet > 0 && len(seen) > 0 {
			left = min(left, quiet)
		}
		if left <= 0 {
			return counts, nil
		}
		m, err := sub.NextMsg(left)
		if err != nil {
			return counts, nil // timed out: everyone who answers has
		}
		var p struct{ Name, ID string }
		if json.Unmarshal(m.Data, &p) != nil || p.Name == "" || seen[p.ID] {
			continue
		}
		seen[p.ID] = true
		counts[p.Name]++
	}
}
