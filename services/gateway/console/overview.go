package console

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
)

// The overview reads a bounded window of the newest events, never the whole
// stream: the last windowEvents events' headers (no payloads, kept in memory
// by a follower: follow.go) give the newest conversations, each stage's
// rate and hop times; the newest sampleCompletions completed events'
// payloads give the error rate and the retriever's search time. Its cost
// does not grow with what is stored.
const (
	windowEvents      = 4000
	windowAge         = 5 * time.Minute
	sampleCompletions = 50
	newestShown       = 20
)

type streamRow struct {
	Name, Role string
	Msgs       uint64
	Bytes      uint64
	MaxBytes   int64
	Err        string
}

type stageRow struct {
	Name, Consumes        string
	Replicas              int
	Waiting               uint64
	InFlight, Redelivered int
	Dead                  uint64
	Rate                  float64 // events per second the stage stored (window)
	P50, P99              time.Duration
	Samples               int
	Measure               string // what P50/P99 measure
	Err                   string
}

type convRow struct {
	ID, LastTurn, LastStage string
	At                      time.Time
	Events                  int
}

type overviewData struct {
	Now      time.Time
	Streams  []streamRow
	Stages   []stageRow
	Services []struct {
		Name     string
		Replicas int
	}
	Window        time.Duration
	WindowEvents  int
	Turns         int
	TurnsPerSec   float64
	Errors        int
	Sampled       int
	ErrorRate     float64
	Conversations []convRow
	DeadTotal     uint64
	Query, Notice string
	// Today is every principal's spend on the current UTC day (cost.go).
	Today    spend.Report
	TodayErr string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	d, err := c.overviewData(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Notice = r.URL.Query().Get("notice")
	c.render(w, r, "overview", "Overview", d)
}

// overviewData gathers the overview, its three reads concurrently: micro
// discovery (replicas), streams and consumers, and the event window.
func (c *Console) overviewData(ctx context.Context) (*overviewData, error) {
	d := &overviewData{Now: c.cfg.Now()}
	var (
		wg       sync.WaitGroup
		replicas map[string]int
		win      window
		winErr   error
		dead     map[string]uint64
		cinfo    = map[string]*jetstream.ConsumerInfo{}
		cerr     = map[string]error{}
		mu       sync.Mutex
	)
	wg.Add(4)
	go func() {
		defer wg.Done()
		var err error
		if d.Today, err = c.spendToday(ctx, d.Now); err != nil {
			d.TodayErr = err.Error()
		}
	}()
	go func() {
		defer wg.Done()
		replicas, _ = pipeline.MicroReplicas(c.cfg.NC, 150*time.Millisecond, 15*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		win, winErr = c.readWindow(ctx, d.Now)
	}()
	go func() {
		defer wg.Done()
		for _, name := range []string{contracts.QueueStreamName, contracts.StreamName} {
			row := streamRow{Name: name, Role: "requests not yet taken by the retriever"}
			if name == contracts.StreamName {
				row.Role = "work and history"
			}
			if s, err := c.js.Stream(ctx, name); err != nil {
				row.Err = err.Error()
			} else {
				info := s.CachedInfo()
				row.Msgs, row.Bytes, row.MaxBytes = info.State.Msgs, info.State.Bytes, info.Config.MaxBytes
				if name == contracts.QueueStreamName {
					if n, err := pipeline.QueuedRequests(ctx, s); err == nil {
						row.Msgs = n
					}
				}
			}
			d.Streams = append(d.Streams, row)
		}
		dead, _ = history.DeadCounts(ctx, c.js)
		var cwg sync.WaitGroup
		for _, st := range layout.Stages {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				ci, err := c.js.Consumer(ctx, contracts.StreamOf(st.In), layout.Durable(st.Name))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					cerr[st.Name] = err
					return
				}
				cinfo[st.Name] = ci.CachedInfo()
			}()
		}
		cwg.Wait()
	}()
	wg.Wait()
	if winErr != nil {
		return nil, winErr
	}
	stageNames := map[string]bool{}
	for _, st := range layout.Stages {
		stageNames["aptix-"+st.Name] = true
		row := stageRow{Name: st.Name, Consumes: contracts.StageFilter(st.In), Replicas: replicas["aptix-"+st.Name], Dead: dead[st.Name]}
		if ci := cinfo[st.Name]; ci != nil {
			row.Waiting, row.InFlight, row.Redelivered = ci.NumPending, ci.NumAckPending, ci.NumRedelivered
		} else if err := cerr[st.Name]; err != nil {
			row.Err = err.Error()
		}
		out := st.Out
		if st.Name == "toolrunner" {
			out = contracts.StageToolRound // its output is an enveloped event like the envelope's: count its input
		}
		if win.span > 0 {
			row.Rate = float64(win.stageEvents[out]) / win.span.Seconds()
		}
		lat := win.hops[st.Name]
		row.Measure = "stored input → stored output"
		if st.Name == "retriever" {
			lat = win.search
			row.Measure = "search (sampled completions)"
		}
		if st.Name == "toolrunner" {
			row.Measure = "-"
		}
		row.Samples = len(lat)
		row.P50, row.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
		d.Stages = append(d.Stages, row)
	}
	// Every dead letter, the gateway's webhooks' too: the card links to the
	// list, which shows them all (it counted only the stages').
	for _, n := range dead {
		d.DeadTotal += n
	}
	for name, n := range replicas {
		if !stageNames[name] && strings.HasPrefix(name, "aptix-") {
			d.Services = append(d.Services, struct {
				Name     string
				Replicas int
			}{name, n})
		}
	}
	sort.Slice(d.Services, func(i, j int) bool { return d.Services[i].Name < d.Services[j].Name })
	d.Window, d.WindowEvents = win.span, win.events
	d.Turns, d.Errors, d.Sampled = win.completed, win.errors, win.sampled
	if win.span > 0 {
		d.TurnsPerSec = float64(win.completed) / win.span.Seconds()
	}
	if win.sampled > 0 {
		d.ErrorRate = float64(win.errors) / float64(win.sampled)
	}
	d.Conversations = win.newest
	return d, nil
}

// window is what the newest events say.
type window struct {
	span        time.Duration // the time the rates are over
	events      int
	stageEvents map[string]int
	hops        map[string][]time.Duration // per stage: its input's stored time → its output's
	search      []time.Duration
	completed   int
	sampled     int
	errors      int
	newest      []convRow
}

// readWindow computes the window from the follower's events (in memory),
// then reads the payloads of the newest sampleCompletions completions in the
// last windowAge, one direct read each.
func (c *Console) readWindow(ctx context.Context, now time.Time) (window, error) {
	w := window{stageEvents: map[string]int{}, hops: map[string][]time.Duration{}}
	events, err := c.follow.snapshot(ctx, 2*time.Second)
	if err != nil {
		return w, err
	}
	w.events = len(events)
	since := now.Add(-windowAge)
	type turnKey struct{ conv, turn string }
	times := map[turnKey]map[string]time.Time{}
	convs := map[string]*convRow{}
	var completedSeqs []uint64
	var oldest time.Time
	for _, o := range events {
		if o.conv == "" {
			continue
		}
		cr := convs[o.conv]
		if cr == nil {
			cr = &convRow{ID: o.conv}
			convs[o.conv] = cr
		}
		cr.Events++
		cr.LastTurn, cr.LastStage, cr.At = o.turn, o.stage, o.at
		if !o.at.After(since) {
			continue
		}
		if oldest.IsZero() {
			oldest = o.at
		}
		w.stageEvents[o.stage]++
		k := turnKey{o.conv, o.turn}
		if times[k] == nil {
			times[k] = map[string]time.Time{}
		}
		times[k][o.stage] = o.at
		if o.stage == contracts.StageCompleted {
			w.completed++
			completedSeqs = append(completedSeqs, o.seq)
		}
	}
	if !oldest.IsZero() {
		w.span = now.Sub(oldest)
		if len(events) < windowEvents || oldest.Before(since.Add(time.Second)) {
			w.span = windowAge // the window covers all of the last minutes
		}
		w.span = max(w.span, time.Second)
	}
	// Each main-line stage after the first: its input's stored time → its
	// output's (the first's input, the request, is not kept in APTIX).
	hop := map[string][2]string{}
	for _, st := range layout.MainLine()[1:] {
		hop[st.Name] = [2]string{st.In, st.Out}
	}
	for _, ts := range times {
		for name, h := range hop {
			a, okA := ts[h[0]]
			b, okB := ts[h[1]]
			if okA && okB && !b.Before(a) {
				w.hops[name] = append(w.hops[name], b.Sub(a))
			}
		}
	}
	list := make([]*convRow, 0, len(convs))
	for _, cr := range convs {
		list = append(list, cr)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].At.After(list[j].At) })
	for _, cr := range list[:min(len(list), newestShown)] {
		w.newest = append(w.newest, *cr)
	}
	if len(completedSeqs) == 0 {
		return w, nil
	}
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return w, err
	}
	sample := completedSeqs[max(0, len(completedSeqs)-sampleCompletions):]
	type result struct {
		ok, isErr bool
		search    time.Duration
		hasSearch bool
	}
	results := make([]result, len(sample))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, seq := range sample {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m, err := s.GetMsg(ctx, seq)
			if err != nil || m.Header.Get(contracts.HeaderClaim) != "" {
				return // trimmed, or claim-checked: not worth an object read here
			}
			var t struct {
				Retrieval *struct {
					TookMs float64 `json:"tookMs"`
				} `json:"retrieval"`
				Response *struct {
					Kind string `json:"kind"`
				} `json:"response"`
			}
			if json.Unmarshal(m.Data, &t) != nil || t.Response == nil {
				return
			}
			r := result{ok: true, isErr: t.Response.Kind == contracts.KindError}
			if t.Retrieval != nil {
				r.search, r.hasSearch = time.Duration(t.Retrieval.TookMs*float64(time.Millisecond)), true
			}
			results[i] = r
		}()
	}
	wg.Wait()
	for _, r := range results {
		if !r.ok {
			continue
		}
		w.sampled++
		if r.isErr {
			w.errors++
		}
		if r.hasSearch {
			w.search = append(w.search, r.search)
		}
	}
	return w, nil
}

// quantile is the q-quantile (nearest rank) of ds; 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// search finds a conversation, a turn or a response (resp_…) by id.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	notFound := func(msg string) {
		c.message(w, r, http.StatusNotFound, "Nothing found", msg)
	}
	if q == "" {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if strings.HasPrefix(q, "resp_") {
		conv, turn, ok, err := c.lookupResponse(ctx, q)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if !ok {
			notFound("No response " + q + " is stored.")
			return
		}
		http.Redirect(w, r, turnURL(conv, turn), http.StatusSeeOther)
		return
	}
	if !validID(q) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "Ids are 1-128 characters of [A-Za-z0-9_-]; response ids start with resp_.")
		return
	}
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.ConversationFilter(q))); err == nil && len(info.State.Subjects) > 0 {
		http.Redirect(w, r, "/console/conversations/"+q, http.StatusSeeOther)
		return
	}
	conv, err := history.FindConversation(ctx, c.js, q)
	if err != nil {
		if isNotStored(err) {
			notFound("No conversation, turn or response " + q + " is stored (trimmed from history, or a typo?).")
			return
		}
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, turnURL(conv, q), http.StatusSeeOther)
}

func (c *Console) lookupResponse(ctx context.Context, id string) (conv, turn string, ok bool, err error) {
	if c.cfg.Responses == nil {
		return "", "", false, nil
	}
	return c.cfg.Responses(ctx, id)
}

// turnURL links a turn with its conversation, so the page needs no lookup.
func turnURL(conv, turn string) string {
	return "/console/turns/" + turn + "?c=" + conv
}
