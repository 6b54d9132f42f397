package loadgen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Spread is a figure over the rounds: its median, least and most.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: round3(m), Min: round3(s[0]), Max: round3(s[len(s)-1]), N: len(s)}
}

func (s Spread) String() string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 {
		return num(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

func num(f float64) string {
	switch {
	case f >= 100 || f <= -100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10 || f <= -10:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.2f", f)
	}
}

// Row is one figure of one side at one concurrency over the rounds.
type Row struct {
	Concurrency int    `json:"concurrency"`
	Side        string `json:"side"`
	Metric      string `json:"metric"`
	Spread
}

// Goal is one performance goal judged on the median of the rounds.
type Goal struct {
	Side     string  `json:"side"`
	Name     string  `json:"name"`
	Value    Spread  `json:"value"`
	Limit    float64 `json:"limit"`
	AtMost   bool    `json:"atMost"` // the value must be ≤ Limit (else ≥)
	Moonshot float64 `json:"moonshot,omitempty"`
	Met      bool    `json:"met"`
}

// Summary is what the table prints: each side's figures, the gateways'
// figures against the direct call of the same round, each other gateway
// against A in the same round, and the goals.
type Summary struct {
	Rows   []Row    `json:"rows"`
	Goals  []Goal   `json:"goals"`
	Labels []string `json:"labels"`
}

// The metrics of a sample, in the table's order.
var metrics = []struct {
	name string
	get  func(Result) float64
}{
	{"p50 ms", func(r Result) float64 { return r.P50 }},
	{"p99 ms", func(r Result) float64 { return r.P99 }},
	{"requests/s", func(r Result) float64 { return r.PerSecond }},
	{"server CPU ms/request", func(r Result) float64 { return r.ServerCPUMs }},
	{"sandbox CPU ms/request", func(r Result) float64 { return r.SandboxCPUMs }},
	{"client CPU ms/request", func(r Result) float64 { return r.ClientCPUMs }},
}

// Derived per round against the same round's direct call.
const (
	addedP50   = "added p50 ms (− direct)"
	addedP99   = "added p99 ms (− direct)"
	rateDirect = "requests/s ÷ direct"
	loopRatio  = "tool loop WebSocket ÷ HTTP"
)

// Summarize reads samples (every side, concurrency and round) into rows
// and judges the goals for each gateway label.
func Summarize(samples []Sample, loops []LoopSample, labels []string) Summary {
	find := func(round int, side string, c int) (Result, bool) {
		for _, s := range samples {
			if s.Round == round && s.Side == side && s.Concurrency == c {
				return s.Result, true
			}
		}
		return Result{}, false
	}
	var rounds, concs []int
	for _, s := range samples {
		if !slices.Contains(rounds, s.Round) {
			rounds = append(rounds, s.Round)
		}
		if !slices.Contains(concs, s.Concurrency) {
			concs = append(concs, s.Concurrency)
		}
	}
	// per collects f over the rounds where every side it needs ran.
	per := func(f func(round int) (float64, bool)) Spread {
		var v []float64
		for _, r := range rounds {
			if x, ok := f(r); ok {
				v = append(v, x)
			}
		}
		return spread(v)
	}
	sum := Summary{Labels: labels}
	byName := map[string]Spread{}
	add := func(c int, side, metric string, s Spread) {
		if s.N > 0 {
			sum.Rows = append(sum.Rows, Row{Concurrency: c, Side: side, Metric: metric, Spread: s})
			byName[fmt.Sprint(c, side, metric)] = s
		}
	}
	for _, c := range concs {
		for _, side := range append([]string{"direct"}, labels...) {
			for _, m := range metrics {
				add(c, side, m.name, per(func(r int) (float64, bool) {
					res, ok := find(r, side, c)
					if !ok || m.get(res) == 0 && m.name != "p50 ms" {
						return 0, false // a figure not read (no pid) is not a zero
					}
					return m.get(res), true
				}))
			}
		}
		for _, side := range labels {
			vsDirect := func(f func(gw, d Result) float64) Spread {
				return per(func(r int) (float64, bool) {
					gw, ok1 := find(r, side, c)
					d, ok2 := find(r, "direct", c)
					return f(gw, d), ok1 && ok2 && d.PerSecond > 0
				})
			}
			add(c, side, addedP50, vsDirect(func(g, d Result) float64 { return g.P50 - d.P50 }))
			add(c, side, addedP99, vsDirect(func(g, d Result) float64 { return g.P99 - d.P99 }))
			add(c, side, rateDirect, vsDirect(func(g, d Result) float64 { return g.PerSecond / d.PerSecond }))
			if side == labels[0] {
				continue
			}
			for _, m := range metrics[:4] {
				add(c, side, m.name+" ÷ A", per(func(r int) (float64, bool) {
					b, ok1 := find(r, side, c)
					a, ok2 := find(r, labels[0], c)
					return m.get(b) / m.get(a), ok1 && ok2 && m.get(a) > 0
				}))
			}
		}
	}
	for _, side := range labels {
		var ws, ht, ratio []float64
		for _, l := range loops {
			if l.Side == side && l.HTTPSeconds > 0 {
				ws, ht, ratio = append(ws, l.WSSeconds), append(ht, l.HTTPSeconds), append(ratio, l.WSSeconds/l.HTTPSeconds)
			}
		}
		add(1, side, "tool loop s, WebSocket", spread(ws))
		add(1, side, "tool loop s, HTTP+SSE", spread(ht))
		add(1, side, loopRatio, spread(ratio))
	}
	for _, side := range labels {
		for _, g := range []Goal{
			{Name: "added p50 at concurrency 1 ≤ 1.0 ms", Limit: 1.0, AtMost: true, Value: byName[fmt.Sprint(1, side, addedP50)]},
			{Name: "added p99 at concurrency 1 ≤ 3 ms", Limit: 3, AtMost: true, Value: byName[fmt.Sprint(1, side, addedP99)]},
			{Name: "server CPU per request at 64 ≤ 0.5 ms (moonshot 0.25)", Limit: 0.5, Moonshot: 0.25, AtMost: true,
				Value: byName[fmt.Sprint(64, side, "server CPU ms/request")]},
			{Name: "throughput at 64 ≥ 0.35 of the direct call's", Limit: 0.35, Value: byName[fmt.Sprint(64, side, rateDirect)]},
			{Name: "WebSocket tool loop ≤ 0.75× HTTP's time per 20-round loop at 1", Limit: 0.75, AtMost: true, Value: byName[fmt.Sprint(1, side, loopRatio)]},
		} {
			if g.Value.N == 0 {
				continue // that concurrency was not run
			}
			g.Side = side
			g.Met = g.Value.Median >= g.Limit
			if g.AtMost {
				g.Met = g.Value.Median <= g.Limit
			}
			sum.Goals = append(sum.Goals, g)
		}
	}
	return sum
}

// Table prints rep: one line per concurrency and figure, a column per side
// (medians with the rounds' range), then the goals.
func Table(w io.Writer, rep *Report) error {
	sum := rep.Summary
	fmt.Fprintf(w, "The gateway from outside: %d rounds, %d warm-up then %v timed requests per run, stream=%v; load average %s at the start, %s at the end\n",
		rep.Rounds, rep.Warmup, rep.Requests, rep.Stream, rep.LoadAvgStart, rep.LoadAvgEnd)
	for _, l := range sum.Labels {
		fmt.Fprintf(w, "  %s = %s up\n", l, rep.Bins[l])
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"conc", "figure", "direct"}
	for _, l := range sum.Labels {
		head = append(head, "gateway "+l)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	type key struct {
		c      int
		metric string
	}
	var order []key
	cells := map[key]map[string]Spread{}
	for _, r := range sum.Rows {
		k := key{r.Concurrency, r.Metric}
		if cells[k] == nil {
			cells[k] = map[string]Spread{}
			order = append(order, k)
		}
		cells[k][r.Side] = r.Spread
	}
	for _, k := range order {
		line := []string{fmt.Sprint(k.c), k.metric, cells[k]["direct"].String()}
		for _, l := range sum.Labels {
			line = append(line, cells[k][l].String())
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Goals (median of the rounds, range in brackets):")
	for _, g := range sum.Goals {
		verdict := "MISSED"
		if g.Met {
			verdict = "met"
			if g.Moonshot > 0 && g.Value.Median <= g.Moonshot {
				verdict = "met, moonshot too"
			}
		}
		fmt.Fprintf(w, "  %s: %s: %s: %s\n", g.Side, g.Name, g.Value, verdict)
	}
	return nil
}
