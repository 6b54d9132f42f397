package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ToolLoop compares a client-side tool loop over WebSocket mode with the
// same loop over HTTP + SSE, on the same gateway and pipeline in
// the same run, the two transports interleaved (one WebSocket loop, one
// HTTP loop, …, the order swapped every other pair), so drift hits both.
// A loop is one response.create with a user message whose sandbox marker
// makes a function call, then Rounds continuations, each sending the
// call's function_call_output with previous_response_id (and a marker for
// the next call, except the last): Rounds+1 responses, every one streamed.
type ToolLoop struct {
	Rounds int `json:"rounds"`
	// At concurrency 1: seconds per loop (median with p10 and p90) over
	// Loops loops of each transport, and the WebSocket / HTTP median ratio.
	Loops     int         `json:"loops"`
	WS        LoopSeconds `json:"ws"`
	HTTP      LoopSeconds `json:"http"`
	TimeRatio float64     `json:"timeRatioWsOverHttp"`
	// At Concurrency: responses per second of each transport (median over
	// Reps interleaved phases of one loop per worker, with min and max),
	// and the WebSocket / HTTP ratio of the medians.
	Concurrency     int        `json:"concurrency"`
	Reps            int        `json:"reps"`
	WSThroughput    Throughput `json:"wsThroughput"`
	HTTPThroughput  Throughput `json:"httpThroughput"`
	ThroughputRatio float64    `json:"throughputRatioWsOverHttp"`
}

// LoopSeconds is the spread of one transport's loop times.
type LoopSeconds struct {
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
}

// Throughput is the spread of one transport's responses per second.
type Throughput struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

var loopTools = []any{map[string]any{"type": "function", "name": "lookup", "description": "Look something up",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}}}}

// loopRequest is round i's create body (without type or stream).
func loopRequest(prev, call string, i, rounds int) map[string]any {
	m := map[string]any{"model": "sandbox-1", "tools": loopTools}
	if i == 0 {
		m["input"] = `Look it up [call:lookup {"q":"round 0"}]`
		return m
	}
	input := []any{map[string]any{"type": "function_call_output", "call_id": call, "output": fmt.Sprintf(`{"answer":%d}`, i)}}
	if i < rounds {
		input = append(input, map[string]any{"type": "message", "role": "user", "content": fmt.Sprintf(`[call:lookup {"q":"round %d"}]`, i)})
	}
	m["previous_response_id"], m["input"] = prev, input
	return m
}

// loopResult reads a terminal event: the response id and its last call id.
func loopResult(data []byte, i, rounds int) (id, call string, err error) {
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Output []struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			} `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", "", err
	}
	r := ev.Response
	if ev.Type != "response.completed" || r.Status != "completed" || len(r.Output) == 0 {
		return "", "", fmt.Errorf("round %d: %s", i, data)
	}
	last := r.Output[len(r.Output)-1]
	if i < rounds && last.Type != "function_call" {
		return "", "", fmt.Errorf("round %d made no call: %s", i, data)
	}
	return r.ID, last.CallID, nil
}

func isTerminal(data []byte) bool {
	return bytes.Contains(data[:min(len(data), 64)], []byte(`"type":"response.`)) &&
		(bytes.HasPrefix(data, []byte(`{"type":"response.completed"`)) || bytes.HasPrefix(data, []byte(`{"type":"response.failed"`)) ||
			bytes.HasPrefix(data, []byte(`{"type":"response.incomplete"`)))
}

// wsLoop runs one tool loop on a new socket (the dial included).
func wsLoop(ctx context.Context, base string, rounds int) error {
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses", nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(16 << 20)
	prev, call := "", ""
	for i := 0; i <= rounds; i++ {
		m := loopRequest(prev, call, i, rounds)
		m["type"] = "response.create"
		b, _ := json.Marshal(m)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return err
			}
			if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
				return fmt.Errorf("round %d: %s", i, data)
			}
			if isTerminal(data) {
				if prev, call, err = loopResult(data, i, rounds); err != nil {
					return err
				}
				break
			}
		}
	}
	return c.Close(websocket.StatusNormalClosure, "")
}

// httpLoop runs one tool loop as streamed POST /v1/responses requests on
// hc's kept-alive connections.
func httpLoop(ctx context.Context, hc *http.Client, base string, rounds int) error {
	prev, call := "", ""
	for i := 0; i <= rounds; i++ {
		m := loopRequest(prev, call, i, rounds)
		m["stream"] = true
		b, _ := json.Marshal(m)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		var terminal []byte
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && isTerminal(data) {
				terminal = append([]byte(nil), data...)
			}
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || terminal == nil {
			return fmt.Errorf("round %d: HTTP %d, terminal event %v", i, resp.StatusCode, terminal != nil)
		}
		if prev, call, err = loopResult(terminal, i, rounds); err != nil {
			return err
		}
	}
	return nil
}

// runToolLoop measures both transports against the gateway at base.
func runToolLoop(ctx context.Context, base string, rounds, loops, concurrency, reps int, progress func(string, ...any)) (ToolLoop, error) {
	tl := ToolLoop{Rounds: rounds, Loops: loops, Concurrency: concurrency, Reps: reps}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * concurrency, MaxIdleConnsPerHost: 2 * concurrency}}
	defer hc.CloseIdleConnections()
	ws := func(ctx context.Context) error { return wsLoop(ctx, base, rounds) }
	ht := func(ctx context.Context) error { return httpLoop(ctx, hc, base, rounds) }
	progress("tool loop: %d rounds, WebSocket vs HTTP+SSE interleaved, concurrency 1, %d loops each", rounds, loops)
	var err error
	if tl.WS, tl.HTTP, err = loopTimes(ctx, hc, base, rounds, loops); err != nil {
		return tl, err
	}
	tl.TimeRatio = ratio(tl.WS.Median, tl.HTTP.Median)

	progress("tool loop: %d rounds, WebSocket vs HTTP+SSE interleaved, concurrency %d, %d phases each", rounds, concurrency, reps)
	phase := func(f func(context.Context) error) (float64, error) {
		var wg sync.WaitGroup
		errs := make(chan error, concurrency)
		t0 := time.Now()
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(ctx); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		return float64(concurrency*(rounds+1)) / el.Seconds(), nil
	}
	var wsR, htR []float64
	for i := range reps {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isWS := range order {
			if isWS {
				r, err := phase(ws)
				if err != nil {
					return tl, fmt.Errorf("websocket at concurrency %d: %w", concurrency, err)
				}
				wsR = append(wsR, r)
			} else {
				r, err := phase(ht)
				if err != nil {
					return tl, fmt.Errorf("http at concurrency %d: %w", concurrency, err)
				}
				htR = append(htR, r)
			}
		}
	}
	tl.WSThroughput, tl.HTTPThroughput = spreadRate(wsR), spreadRate(htR)
	tl.ThroughputRatio = ratio(tl.WSThroughput.Median, tl.HTTPThroughput.Median)
	return tl, nil
}

// LoopTimes times loops tool loops of each transport at concurrency 1
// against the gateway at base (http://host:port), after three of each as a
// warm-up: WebSocket mode and HTTP+SSE alternately, the order swapped every
// other pair, so drift hits both. aptix-load runs it from outside.
func LoopTimes(ctx context.Context, base string, rounds, loops int) (ws, ht LoopSeconds, err error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer hc.CloseIdleConnections()
	return loopTimes(ctx, hc, base, rounds, loops)
}

// loopTimes is LoopTimes with the HTTP loops on hc's connections.
func loopTimes(ctx context.Context, hc *http.Client, base string, rounds, loops int) (ws, ht LoopSeconds, err error) {
	wsf := func(ctx context.Context) error { return wsLoop(ctx, base, rounds) }
	htf := func(ctx context.Context) error { return httpLoop(ctx, hc, base, rounds) }
	for range 3 { // warm-up
		if err := wsf(ctx); err != nil {
			return ws, ht, fmt.Errorf("websocket tool loop: %w", err)
		}
		if err := htf(ctx); err != nil {
			return ws, ht, fmt.Errorf("http tool loop: %w", err)
		}
	}
	var wsT, htT []time.Duration
	timed := func(f func(context.Context) error, into *[]time.Duration, what string) error {
		t0 := time.Now()
		if err := f(ctx); err != nil {
			return fmt.Errorf("%s tool loop: %w", what, err)
		}
		*into = append(*into, time.Since(t0))
		return nil
	}
	for i := range loops {
		first, second := func() error { return timed(wsf, &wsT, "websocket") }, func() error { return timed(htf, &htT, "http") }
		if i%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return ws, ht, err
		}
		if err := second(); err != nil {
			return ws, ht, err
		}
	}
	return spread(wsT), spread(htT), nil
}

func spread(d []time.Duration) LoopSeconds {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	sec := func(x time.Duration) float64 { return round3(float64(x) / 1e6 / 1e3) }
	return LoopSeconds{P10: sec(pct(s, 10)), Median: sec(pct(s, 50)), P90: sec(pct(s, 90))}
}

func spreadRate(r []float64) Throughput {
	s := append([]float64(nil), r...)
	sort.Float64s(s)
	if len(s) == 0 {
		return Throughput{}
	}
	return Throughput{Min: round1(s[0]), Median: round1(s[(len(s)-1)/2]), Max: round1(s[len(s)-1])}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
