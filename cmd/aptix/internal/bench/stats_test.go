package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestPeakRSSIsThisProcesss: a child started by a process that had grown
// large reports its own peak, not its parent's (the soak runs as such a
// child of the whole bench, whose own peak is far higher).
func TestPeakRSSIsThisProcesss(t *testing.T) {
	if os.Getenv("APTIX_PEAK_RSS_CHILD") == "1" {
		os.Stdout.WriteString(strconv.FormatFloat(peakRSSMiB(), 'f', 1, 64))
		return
	}
	big := make([]byte, 400<<20)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPeakRSSIsThisProcesss$")
	cmd.Env = append(os.Environ(), "APTIX_PEAK_RSS_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	child, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(first, "PASS")), 64)
	if err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	parent := peakRSSMiB()
	if parent < 400 || child > 200 {
		t.Fatalf("parent peak %.1f MiB (want at least 400), child peak %.1f MiB (want its own, well under 200)", parent, child)
	}
	_ = big[len(big)-1]
}
