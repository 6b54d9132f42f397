package skipgram_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/retriever/skipgram"
)

func TestReadCorpus(t *testing.T) {
	c, err := skipgram.ReadCorpus(strings.NewReader("b a b\n\nc a b\nrare c\nonce\n"), 2)
	if err != nil {
		t.Fatal(err)
	}
	// b 3, a 2, c 2 (a seen first); rare and once dropped, and the line
	// left empty with them.
	if want := []string{"b", "a", "c"}; !slices.Equal(c.Words, want) {
		t.Fatalf("words %v, want %v", c.Words, want)
	}
	if want := []int64{3, 2, 2}; !slices.Equal(c.Counts, want) {
		t.Fatalf("counts %v, want %v", c.Counts, want)
	}
	var lines [][]int32
	c.Lines(func(l []int32) { lines = append(lines, slices.Clone(l)) })
	if want := [][]int32{{0, 1, 0}, {2, 1, 0}, {2}}; fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("lines %v, want %v", lines, want)
	}
}

// topics writes lines each drawn from one of two vocabularies, so words
// of one topic share contexts and words of two never do.
func topics(lines int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for range lines {
		topic := "a"
		if r.IntN(2) == 1 {
			topic = "b"
		}
		for range 12 {
			fmt.Fprintf(&b, "%s%d ", topic, r.IntN(8))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cos(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func small() skipgram.Config {
	cfg := skipgram.Defaults()
	cfg.Dim, cfg.Epochs, cfg.Sample = 16, 3, 0
	return cfg
}

// TestTrainLearnsTopics: words that share contexts end up closer than
// words that never do.
func TestTrainLearnsTopics(t *testing.T) {
	c, err := skipgram.ReadCorpus(strings.NewReader(topics(2000, 1)), 1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := skipgram.Train(c, small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := func(w string) int { return slices.Index(c.Words, w) }
	var same, other float64
	for i := range 8 {
		for j := range 8 {
			if i != j {
				same += cos(m.Vector(id(fmt.Sprint("a", i))), m.Vector(id(fmt.Sprint("a", j))))
			}
			other += cos(m.Vector(id(fmt.Sprint("a", i))), m.Vector(id(fmt.Sprint("b", j))))
		}
	}
	same, other = same/56, other/64
	if same < other+0.5 {
		t.Fatalf("mean cosine within a topic %.3f, across %.3f: the topics are not learned", same, other)
	}
}

// TestTrainRepeatable: one corpus and one seed give the same vectors bit
// for bit; another seed does not.
func TestTrainRepeatable(t *testing.T) {
	c, err := skipgram.ReadCorpus(strings.NewReader(topics(300, 2)), 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := small()
	cfg.Sample = 1e-2
	a, _ := skipgram.Train(c, cfg, nil)
	b, _ := skipgram.Train(c, cfg, nil)
	if !slices.Equal(a.In, b.In) {
		t.Fatal("two runs with one seed differ")
	}
	cfg.Seed++
	if d, _ := skipgram.Train(c, cfg, nil); slices.Equal(a.In, d.In) {
		t.Fatal("another seed gives the same vectors")
	}
}

func TestTrainRefuses(t *testing.T) {
	c, _ := skipgram.ReadCorpus(strings.NewReader("a b\n"), 5)
	if _, err := skipgram.Train(c, skipgram.Defaults(), nil); err == nil {
		t.Fatal("an empty corpus trained")
	}
	c, _ = skipgram.ReadCorpus(strings.NewReader("a b\n"), 1)
	cfg := skipgram.Defaults()
	cfg.Window = 0
	if _, err := skipgram.Train(c, cfg, nil); err == nil {
		t.Fatal("a zero window trained")
	}
}

// BenchmarkTrain reports the words trained per second at the retriever's
// settings.
func BenchmarkTrain(b *testing.B) {
	c, err := skipgram.ReadCorpus(strings.NewReader(topics(20000, 3)), 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := skipgram.Defaults()
	cfg.Epochs, cfg.Sample = 1, 0
	for b.Loop() {
		if _, err := skipgram.Train(c, cfg, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(c.Tokens))*float64(b.N)/b.Elapsed().Seconds(), "words/s")
}
