package skipgram

import (
	"fmt"
	"math"
)

// Config is what a training run does; Defaults is the retriever's.
type Config struct {
	Dim    int // coordinates per vector
	Window int // farthest context word; each position draws its own, 1 to Window
	// Negative is how many noise words each pair is contrasted with, drawn
	// by frequency to the power 0.75.
	Negative int
	Epochs   int
	// Sample drops occurrences of words more frequent than this share of
	// the text at random (word2vec's subsampling), so "the" teaches less.
	Sample float64
	// Alpha is the learning rate at the start, falling linearly to MinAlpha
	// at the end of the last epoch.
	Alpha, MinAlpha float64
	Seed            uint64
}

// Defaults are what the retriever's vectors are learned with: word2vec's
// skip-gram with 10 noise words, subsampling at 10^-4 and the rate
// falling to 10^-4, as the twelfth pass's gensim run had them.
func Defaults() Config {
	return Config{Dim: 100, Window: 5, Negative: 10, Epochs: 5, Sample: 1e-4, Alpha: 0.025, MinAlpha: 0.0001, Seed: 1}
}

// Model holds the learned vectors: word i of the corpus at In[i*Dim:].
type Model struct {
	Dim int
	In  []float32
}

// Vector is word i's vector.
func (m *Model) Vector(i int) []float32 { return m.In[i*m.Dim : (i+1)*m.Dim] }

const (
	expSize = 1000 // sigmoid table entries over [-maxExp, maxExp]
	maxExp  = 6
)

// rng is word2vec's linear congruential generator: fast, and the same
// sequence for a seed everywhere. Draws shift its lowest 8 bits or more
// away: they cycle fastest.
type rng uint64

func (r *rng) next() uint64 {
	*r = *r*25214903917 + 11
	return uint64(*r)
}

// unit draws from [0, 1).
func (r *rng) unit() float64 { return float64(r.next()>>11) / (1 << 53) }

// trainer is one run's state.
type trainer struct {
	cfg     Config
	in, out []float32
	work    []float32
	noise   alias
	sigmoid [expSize]float32
	keep    []float64 // chance an occurrence of word i is kept
	r       rng
}

// Train learns c's vectors with cfg. progress, if not nil, is called with
// the share of the run done, about every million words.
func Train(c *Corpus, cfg Config, progress func(done float64)) (*Model, error) {
	if cfg.Dim < 1 || cfg.Window < 1 || cfg.Negative < 1 || cfg.Epochs < 1 || cfg.Alpha <= 0 {
		return nil, fmt.Errorf("skipgram: bad config %+v", cfg)
	}
	if len(c.Words) == 0 || len(c.Tokens) == 0 {
		return nil, fmt.Errorf("skipgram: empty corpus")
	}
	t := &trainer{cfg: cfg, r: rng(cfg.Seed), work: make([]float32, cfg.Dim)}
	n := len(c.Words)
	t.in = make([]float32, n*cfg.Dim)
	t.out = make([]float32, n*cfg.Dim)
	for i := range t.in {
		t.in[i] = float32((t.r.unit() - 0.5) / float64(cfg.Dim))
	}
	t.noise = newAlias(c.Counts)
	for i := range t.sigmoid {
		e := math.Exp((float64(i)/expSize*2 - 1) * maxExp)
		t.sigmoid[i] = float32(e / (e + 1))
	}
	t.keep = keepChances(c.Counts, cfg.Sample)

	total := float64(len(c.Tokens)) * float64(cfg.Epochs)
	var done, since int
	report := 1_000_000
	alpha := float32(cfg.Alpha)
	sen := make([]int32, 0, 1024)
	for range cfg.Epochs {
		c.Lines(func(line []int32) {
			sen = sen[:0]
			for _, w := range line {
				if k := t.keep[w]; k < 1 && t.r.unit() >= k {
					continue
				}
				sen = append(sen, w)
			}
			t.sentence(sen, alpha)
			done += len(line)
			if since += len(line); since >= 10_000 {
				since = 0
				share := float64(done) / total
				alpha = float32(max(cfg.Alpha-(cfg.Alpha-cfg.MinAlpha)*share, cfg.MinAlpha))
				if progress != nil && done >= report {
					report += 1_000_000
					progress(share)
				}
			}
		})
	}
	return &Model{Dim: cfg.Dim, In: t.in}, nil
}

// sentence trains every pair of one line's kept words within each
// position's drawn window.
func (t *trainer) sentence(sen []int32, alpha float32) {
	for i, center := range sen {
		b := int((t.r.next() >> 16) % uint64(t.cfg.Window))
		lo, hi := max(i-t.cfg.Window+b, 0), min(i+t.cfg.Window-b, len(sen)-1)
		for j := lo; j <= hi; j++ {
			if j != i {
				t.pair(sen[j], center, alpha)
			}
		}
	}
}

// pair moves the context word's vector towards predicting center and
// away from predicting Negative noise words, and those words' output
// vectors with it.
func (t *trainer) pair(context, center int32, alpha float32) {
	dim := t.cfg.Dim
	in := t.in[int(context)*dim : int(context)*dim+dim]
	work := t.work[:dim]
	clear(work)
	for d := 0; d <= t.cfg.Negative; d++ {
		target, label := center, float32(1)
		if d > 0 {
			target = t.noise.draw(t.r.next())
			if target == center {
				continue
			}
			label = 0
		}
		out := t.out[int(target)*dim : int(target)*dim+dim]
		f := dot(in, out)
		var g float32
		switch {
		case f >= maxExp:
			g = (label - 1) * alpha
		case f <= -maxExp:
			g = label * alpha
		default:
			g = (label - t.sigmoid[int((f+maxExp)*(expSize/maxExp/2))]) * alpha
		}
		axpy(work, g, out)
		axpy(out, g, in)
	}
	axpy(in, 1, work)
}

// alias draws word ids in proportion to their counts to the power 0.75
// (Walker's alias method): one draw is one random number and two reads
// from arrays the size of the vocabulary, where word2vec's table of 10^8
// entries costs a cache miss a draw.
type alias struct {
	prob  []uint32 // chance of keeping the column's own word, of 2^24
	other []int32  // the word drawn otherwise
}

func newAlias(counts []int64) alias {
	n := len(counts)
	w := make([]float64, n)
	var sum float64
	for i, c := range counts {
		w[i] = math.Pow(float64(c), 0.75)
		sum += w[i]
	}
	a := alias{prob: make([]uint32, n), other: make([]int32, n)}
	var small, large []int32
	for i := range w {
		w[i] *= float64(n) / sum
		if w[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		a.prob[s], a.other[s] = uint32(w[s]*(1<<24)), l
		w[l] -= 1 - w[s]
		if w[l] < 1 {
			large, small = large[:len(large)-1], append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		a.prob[i], a.other[i] = 1<<24, i
	}
	return a
}

// draw turns one random number into a word: its top 32 bits pick a
// column, 24 bits below them the column's word or its alias.
func (a alias) draw(u uint64) int32 {
	col := int32((u >> 32) * uint64(len(a.prob)) >> 32)
	if uint32(u>>8)&(1<<24-1) < a.prob[col] {
		return col
	}
	return a.other[col]
}

// keepChances is word2vec's subsampling: a word with count n in a text of
// total words is kept with chance (sqrt(n/(s·total)) + 1) · s·total/n, at
// most 1.
func keepChances(counts []int64, sample float64) []float64 {
	var total float64
	for _, n := range counts {
		total += float64(n)
	}
	keep := make([]float64, len(counts))
	for i, n := range counts {
		keep[i] = 1
		if sample > 0 {
			th := sample * total
			keep[i] = min((math.Sqrt(float64(n)/th)+1)*th/float64(n), 1)
		}
	}
	return keep
}

// dot is the dot product of two vectors of one length.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float32(a[i] * b[i]) // each product rounded: no fused multiply-add, on any GOAMD64
		s1 += float32(a[i+1] * b[i+1])
		s2 += float32(a[i+2] * b[i+2])
		s3 += float32(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float32(a[i] * b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds g·x to y.
func axpy(y []float32, g float32, x []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += float32(g * x[i])
		y[i+1] += float32(g * x[i+1])
		y[i+2] += float32(g * x[i+2])
		y[i+3] += float32(g * x[i+3])
	}
	for ; i < len(y); i++ {
		y[i] += float32(g * x[i])
	}
}
