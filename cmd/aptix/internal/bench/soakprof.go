package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// soakProfiler samples the process while the soak runs, when
// APTIX_SOAK_PROFILE names a directory: each time RSS reaches a new peak it
// writes the in-use heap and goroutine profiles there (heap-peak.pb.gz,
// goroutine-peak.pb.gz), and it logs, at each sample, RSS beside what the Go
// runtime accounts for, so what is not Go heap shows. A diagnostic for
// finding where the soak's memory goes; unset, it does nothing.
func soakProfiler(progress func(string, ...any)) (stop func()) {
	dir := os.Getenv("APTIX_SOAK_PROFILE")
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	names := []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes",
		"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes",
		"/memory/classes/other:bytes", "/memory/classes/metadata/other:bytes",
		"/memory/classes/total:bytes", "/sched/goroutines:goroutines", "/gc/heap/goal:bytes"}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	go func() {
		defer close(finished)
		var peak int64
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rss := rssBytes()
			metrics.Read(samples)
			var b strings.Builder
			fmt.Fprintf(&b, "rss %d MiB", rss>>20)
			for _, s := range samples {
				short := strings.TrimPrefix(strings.TrimPrefix(s.Name, "/memory/classes/"), "/")
				fmt.Fprintf(&b, " %s %d", short[:strings.IndexByte(short, ':')], mib(s.Value.Uint64(), s.Name))
			}
			progress("soak profile: %s", b.String())
			if rss > peak+peak/50 {
				peak = rss
				writeProfile(filepath.Join(dir, "heap-peak.pb.gz"), "heap")
				writeProfile(filepath.Join(dir, "goroutine-peak.pb.gz"), "goroutine")
			}
		}
	}()
	return func() { close(done); <-finished }
}

func mib(v uint64, name string) uint64 {
	if strings.HasSuffix(name, ":bytes") {
		return v >> 20
	}
	return v
}

func writeProfile(path, name string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup(name).WriteTo(f, 0)
}

// rssBytes is the process's current resident set size (Linux).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
