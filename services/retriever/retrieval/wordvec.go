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
)

// wordvecData are word vectors learned offline from the doc comments and
// comments of 113,000 Go files of Debian's golang-*-dev packages and the
// Go standard library (cmd/wordvectors, docs/retrieval.md "Twelfth pass"):
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

// add adds w times the word's unit vector to acc; false when the word has
// none.
func (v *vectors) add(acc []float32, term string, w float64) bool {
	i, ok := v.index[term]
	if !ok {
		return false
	}
	s := float32(w) * v.scale[i]
	for k, x := range v.data[int(i)*v.dim : int(i+1)*v.dim] {
		acc[k] += s * float32(x)
	}
	return true
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
