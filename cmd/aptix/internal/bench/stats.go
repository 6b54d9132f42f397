package bench

import (
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Latency summarizes one series of durations, in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

func summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return Latency{N: len(s), P50: ms(pct(s, 50)), P90: ms(pct(s, 90)), P99: ms(pct(s, 99)), Max: ms(s[len(s)-1])}
}

// pct is the nearest-rank percentile of sorted s.
func pct(s []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// peakRSSMiB is the process's peak resident set size so far: VmHWM, the
// high-water mark of this process's own memory. getrusage's ru_maxrss is
// not: Linux carries it across exec from the memory the process replaced,
// and Go starts a child sharing its parent's memory until the exec, so a
// child of a 1.7 GiB bench reported 1.9 GiB for a soak that peaked under
// 1 GiB run on its own.
func peakRSSMiB() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kib, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64); err == nil {
					return math.Round(kib/1024*10) / 10
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return math.Round(float64(ru.Maxrss)/1024*10) / 10 // Linux reports KiB
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
