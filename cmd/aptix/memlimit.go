package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// EnvMemoryLimit sets the soft memory limit of `aptix up`'s process.
const EnvMemoryLimit = "APTIX_MEMORY_LIMIT"

// upMemoryLimit is the soft limit `aptix up` applied (0: none), for its banner.
var upMemoryLimit int64

// describeMemoryLimit is the banner's Memory line.
func describeMemoryLimit(n int64) string {
	if n <= 0 || n == math.MaxInt64 {
		return "no soft limit (" + EnvMemoryLimit + "=2GiB sets one)"
	}
	return "soft limit " + layout.FormatBytes(n) + " (" + EnvMemoryLimit + "=off lifts it; past it the collector works harder, never refuses memory)"
}

// defaultMemoryLimit is the Go runtime's soft limit in `aptix up` when
// neither APTIX_MEMORY_LIMIT nor GOMEMLIMIT says otherwise: 7/8 GiB, so the
// process (the binary's own pages and the runtime's memory) stays near
// 1 GiB. Without it the heap grows to twice what is live before a
// collection: with thousands of turns in flight the embedded server's block
// caches and the turns' events are live at once, and twice that is the
// process's peak. The limit is soft: a process whose live memory needs more
// grows past it, the collector then taking at most half the CPU.
const defaultMemoryLimit = 896 << 20

// applyMemoryLimit sets the soft memory limit: APTIX_MEMORY_LIMIT (a size
// such as 2GiB, or off), else GOMEMLIMIT as the Go runtime reads it, else
// defaultMemoryLimit. It returns the limit set, 0 for none.
func applyMemoryLimit() (int64, error) {
	v := strings.TrimSpace(os.Getenv(EnvMemoryLimit))
	switch {
	case strings.EqualFold(v, "off"):
		debug.SetMemoryLimit(math.MaxInt64)
		return 0, nil
	case v != "":
		n, err := parseSize(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", EnvMemoryLimit, err)
		}
		debug.SetMemoryLimit(n)
		return n, nil
	case os.Getenv("GOMEMLIMIT") != "":
		return debug.SetMemoryLimit(-1), nil // the runtime applied it at start
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	return defaultMemoryLimit, nil
}

// parseSize reads a byte count with an optional B, KiB, MiB or GiB suffix,
// as GOMEMLIMIT does.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("memory limit %q: want a size such as 900MiB or 2GiB, or off", s)
	}
	return n * mult, nil
}
