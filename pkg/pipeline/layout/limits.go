package layout

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseBytes reads a size as operators write it: 1048576, 512KiB, 256MiB,
// 2GiB, 1GB (decimal units are powers of 1000, binary ones of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, e.g. 256MiB or 2GiB", s)
	}
	return int64(n * float64(mult)), nil
}

// ParseAge reads a duration with a day unit too: 7d, 36h, 90m.
func ParseAge(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("age %q: want e.g. 7d, 36h or 90m", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("age %q: want e.g. 7d, 36h or 90m", s)
	}
	return d, nil
}

// FormatBytes prints a size in binary units for status output.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
