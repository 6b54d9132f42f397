package retrieval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/aptix-dev/aptix/services/retriever/termindex"
)

// wordvecData are word vectors learned offline from the doc comments and
// comments of 120,000 Go files of Debian's golang-*-dev packages and the
// Go standard library (cmd/wordvectors, package skipgram; docs/retrieval.md
// "Twelfth pass", "Thirteenth pass"):
// a developer's English, the words a question uses and the words code
// says them with, in codetext's analysis, the 50,000 most frequent, one
// signed byte a dimension. A question says "thread-safe" where the doc
// says "concurrent use"; no field of the chunk holds the word, but the
// two words' vectors lie close.
//
//go:embed wordvec.bin.gz
var wordvecData []byte

// vectors are the decoded word vectors, read once on first use.
type vectors struct {
	dim   int
	index map[string]int32
	data  []int8    // dim per word
	scale []float32 // 1 / the word's vector's norm
}

var wordVectors = sync.OnceValue(func() *vectors {
	v, err := decodeVectors(wordvecData)
	if err != nil {
		panic(fmt.Errorf("retrieval: embedded word vectors: %w", err))
	}
	return v
})

func decodeVectors(b []byte) (*vectors, error) {
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(z)
	var head struct {
		Magic [8]byte
		Words uint32
		Dim   uint32
	}
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, err
	}
	if string(head.Magic[:]) != "APTIXWV1" {
		return nil, fmt.Errorf("bad magic %q", head.Magic)
	}
	v := &vectors{dim: int(head.Dim), index: make(map[string]int32, head.Words), data: make([]int8, int(head.Words)*int(head.Dim)), scale: make([]float32, head.Words)}
	word := make([]byte, 255)
	for i := range int(head.Words) {
		n, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("word %d: %w", i, err)
		}
		if _, err := io.ReadFull(r, word[:n]); err != nil {
			return nil, fmt.Errorf("word %d: %w", i, err)
		}
		row := v.data[i*v.dim : (i+1)*v.dim]
		if err := binary.Read(r, binary.LittleEndian, row); err != nil {
			return nil, fmt.Errorf("word %d: %w", i, err)
		}
		var norm float64
		for _, x := range row {
			norm += float64(x) * float64(x)
		}
		if norm > 0 {
			v.scale[i] = float32(1 / math.Sqrt(norm))
		}
		v.index[string(word[:n])] = int32(i)
	}
	return v, nil
}

// EncodeVectors writes words' vectors (dim coordinates each, word i's at
// data[i*dim:]) in the embedded file's format, which decodeVectors reads:
// gzip of "APTIXWV1", the word count and dim as little-endian uint32, then
// per word its length in one byte, its bytes and its coordinates as int8,
// scaled so the largest is ±127. Only a vector's direction is kept; the
// cosines the reranker takes do not need more.
func EncodeVectors(w io.Writer, words []string, dim int, data []float32) error {
	if len(data) != len(words)*dim {
		return fmt.Errorf("encode vectors: %d coordinates for %d words of %d", len(data), len(words), dim)
	}
	z, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	b := bufio.NewWriter(z)
	b.WriteString("APTIXWV1")
	binary.Write(b, binary.LittleEndian, [2]uint32{uint32(len(words)), uint32(dim)})
	row := make([]int8, dim)
	for i, word := range words {
		if len(word) == 0 || len(word) > 255 {
			return fmt.Errorf("encode vectors: word %d is %d bytes, want 1 to 255", i, len(word))
		}
		x := data[i*dim : (i+1)*dim]
		clear(row) // a zero vector stays zero, not the last word's
		var top float64
		for _, c := range x {
			top = max(top, math.Abs(float64(c)))
		}
		for k, c := range x {
			if top > 0 {
				row[k] = int8(math.Round(float64(c) * 127 / top))
			}
		}
		b.WriteByte(byte(len(word)))
		b.WriteString(word)
		binary.Write(b, binary.LittleEndian, row)
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	if err := z.Close(); err != nil {
		return fmt.Errorf("encode vectors: %w", err)
	}
	return nil
}

// add adds w times the word's unit vector to acc; false when the word has
// none.
func (v *vectors) add(acc []float32, term string, w float64) bool {
	i, ok := v.index[term]
	if ok {
		v.addRow(acc, termVec{row: i, w: float32(w) * v.scale[i]})
	}
	return ok
}

// cosine of two sums of vectors; 0 when either is empty.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// addRow adds a resolved term's weighed vector to acc.
func (v *vectors) addRow(acc []float32, t termVec) {
	if t.row < 0 {
		return
	}
	for k, x := range v.data[int(t.row)*v.dim : int(t.row+1)*v.dim] {
		acc[k] += float32(t.w * float32(x)) // rounded: no build fuses it, so a chunk's vector is the same on every CPU
	}
}

// termVec is a term's vector row (-1: none) and its weight: its idf in
// the text over its vector's norm.
type termVec struct {
	row int32
	w   float32
}

// vecCache keeps each term's termVec by its id in the Symbol and Doc
// dictionaries of the scoring index, so a search finds a hit's vectors
// without hashing its words. Reset with every index batch: ids and idf
// change with the index.
type vecCache struct {
	mu          sync.Mutex
	symbol, doc []termVec // by term id; row -2: not resolved yet
}

func (c *vecCache) reset() {
	c.mu.Lock()
	c.symbol, c.doc = nil, nil
	c.mu.Unlock()
}

// resolve returns the termVec of each id of field's dictionary (Summary:
// Doc's), resolving those not cached yet.
func (c *vecCache) resolve(ix *Index, field int, ids []uint32) []termVec {
	out := make([]termVec, len(ids))
	c.mu.Lock()
	tab := &c.doc
	if field == termindex.Symbol {
		tab = &c.symbol
	}
	var missing []int
	for k, id := range ids {
		if int(id) < len(*tab) && (*tab)[id].row != -2 {
			out[k] = (*tab)[id]
		} else {
			missing = append(missing, k)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	vs := wordVectors()
	n := float64(max(ix.mem.Len(), 1))
	for _, k := range missing {
		t := ix.mem.Term(field, ids[k])
		tv := termVec{row: -1}
		if row, ok := vs.index[t]; ok {
			tv = termVec{row: row, w: float32(idf(n, ix.mem.DocFreq(termindex.Content, t))) * vs.scale[row]}
		}
		out[k] = tv
	}
	c.mu.Lock()
	size := ix.mem.TermCount(field)
	if len(*tab) < size {
		grown := make([]termVec, size)
		copy(grown, *tab)
		for i := len(*tab); i < size; i++ {
			grown[i].row = -2
		}
		*tab = grown
	}
	for _, k := range missing {
		if int(ids[k]) < len(*tab) {
			(*tab)[ids[k]] = out[k]
		}
	}
	c.mu.Unlock()
	return out
}

// textShare is how much a chunk's whole text (its symbol and every line:
// identifiers split into words, strings, comments, the doc comment's
// words again) weighs beside its doc comment in the chunk's vector
// (chunkVector). Of 0, 0.5 and 1, 0.5 measured best with the trees over
// 5 folds (docs/retrieval.md, "Fifteenth pass").
const textShare = 0.5

// chunkVector is a chunk's place in meaning for the nearest-chunk search
// (termindex.Query.Near): its doc comment's words (unitSum) plus
// textShare times its whole text's, summed and quantised (quantise). The
// text gives a chunk without a doc comment a place (a third of
// nats-server's unexported functions have none, and an isOutOfSpaceErr
// says "space" and "left" only in its code; a Markdown section has none
// to read), and reads a doc comment in the light of the code under it.
// nil when none of its words has a vector.
func chunkVector(doc, symbol, text []string) []int8 {
	v, t := unitSum(doc), unitSum(symbol, text)
	for i := range v {
		v[i] += float32(textShare * t[i]) // rounded: no CPU fuses a multiply-add (replicas agree)
	}
	return quantise(v)
}

// unitSum is the distinct words' unit vectors of the fields, each weighed by
// how rare the word is where the vectors were learned (ln(1 + rank/10), the
// vectors being stored most frequent first), summed and scaled to unit
// length; zero when none has a vector. Not the index's idf: a chunk's vector
// must not depend on what else the index held when it was added, or
// replicas that loaded the bucket in another order would rank apart.
func unitSum(fields ...[]string) []float32 {
	vs := wordVectors()
	acc := make([]float32, vs.dim)
	seen := make(map[string]bool, 64)
	for _, terms := range fields {
		for _, t := range terms {
			if row, ok := vs.index[t]; ok && !seen[t] {
				seen[t] = true
				vs.addRow(acc, termVec{row: row, w: float32(math.Log1p(float64(row+1)/10)) * vs.scale[row]})
			}
		}
	}
	if ss := sumSquares(acc); ss > 0 {
		n := math.Sqrt(ss)
		for i := range acc {
			acc[i] = float32(float64(acc[i]) / n)
		}
	}
	return acc
}

// questionSum is a question's words' unit vectors weighed by idf, summed:
// what similarities compares the hits with, and, quantised, the vector
// the nearest-chunk search looks near.
func questionSum(groups [][]string, idf []float64) []float32 {
	vs := wordVectors()
	acc := make([]float32, vs.dim)
	for g, ts := range groups {
		vs.add(acc, ts[0], idf[g])
	}
	return acc
}

// quantise scales v to unit length and each coordinate to a signed byte
// (±127: termindex's cosine8); nil for a zero vector.
func quantise(v []float32) []int8 {
	ss := sumSquares(v)
	if ss == 0 {
		return nil
	}
	inv := 127 / math.Sqrt(ss)
	out := make([]int8, len(v))
	for i, x := range v {
		out[i] = int8(math.Round(float64(x) * inv))
	}
	return out
}

// sumSquares is v's squared length, summed in float64.
func sumSquares(v []float32) float64 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	return ss
}
