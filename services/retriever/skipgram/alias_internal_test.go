package skipgram

import (
	"math"
	"testing"
)

// TestAliasDraws: each word is drawn in proportion to its count to the
// power 0.75.
func TestAliasDraws(t *testing.T) {
	counts := []int64{1000, 300, 300, 50, 7, 5, 1}
	a := newAlias(counts)
	var sum float64
	for _, c := range counts {
		sum += math.Pow(float64(c), 0.75)
	}
	const n = 2_000_000
	got := make([]int, len(counts))
	r := rng(7)
	for range n {
		got[a.draw(r.next())]++
	}
	for i, c := range counts {
		want := math.Pow(float64(c), 0.75) / sum * n
		if d := math.Abs(float64(got[i]) - want); d > 5*math.Sqrt(want)+1 {
			t.Errorf("word %d (count %d) drawn %d times, want about %.0f", i, c, got[i], want)
		}
	}
}
