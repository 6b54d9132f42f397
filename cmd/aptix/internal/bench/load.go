package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Load is the result of one closed-loop run: each of Concurrency workers
// sends an operation, waits for it, and sends the next.
type Load struct {
	Concurrency int     `json:"concurrency"`
	Ops         int     `json:"ops"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"perSecond"`
	Latency     Latency `json:"latency"`
	FirstError  string  `json:"firstError,omitempty"`
	// CPUMsPerOp is the process's CPU time (user + system: stages,
	// nats-server, sandbox and client together) per completed operation:
	// on a shared machine it varies far less than the wall-clock rate, and
	// at saturation the rate is the cores over it.
	CPUMsPerOp float64 `json:"cpuMsPerOp"`
}

// closedLoop runs op n times with the given concurrency and times each call.
func closedLoop(ctx context.Context, n, concurrency int, op func(ctx context.Context, i int) error) Load {
	var (
		next    atomic.Int64
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n)
		errs    int
		firstEr error
		wg      sync.WaitGroup
	)
	start := time.Now()
	cpu0 := cpuTime()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, n/concurrency+1)
			var localErrs int
			var localFirst error
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					localErrs++
					if localFirst == nil {
						localFirst = err
					}
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			errs += localErrs
			if firstEr == nil {
				firstEr = localFirst
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	l := Load{Concurrency: concurrency, Ops: n, Errors: errs, Seconds: el.Seconds(), Latency: summarize(lat)}
	l.PerSecond = float64(len(lat)) / el.Seconds()
	if len(lat) > 0 {
		l.CPUMsPerOp = round3(float64(cpu) / 1e6 / float64(len(lat)))
	}
	if firstEr != nil {
		l.FirstError = firstEr.Error()
	}
	return l
}

// errLoad turns a run with errors into an error, so a benchmark that lost
// turns cannot print a pretty table.
func (l Load) err(what string) error {
	if l.Errors == 0 {
		return nil
	}
	return errors.New(fmt.Sprintf("%s: %d of %d operations failed; first: %s", what, l.Errors, l.Ops, l.FirstError))
}
