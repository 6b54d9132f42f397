// Package skipgram learns word vectors from lines of words: skip-gram
// with negative sampling (Mikolov et al., 2013), the method of word2vec
// and gensim, in plain Go on one goroutine, so one corpus and one seed
// give the same vectors bit for bit from one build on one kind of CPU
// (math.Exp picks its code by CPU). The retriever's
// embedded vectors are learned with it (cmd/wordvectors).
package skipgram

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
)

// Corpus is a text read into word ids: the words seen at least a minimum
// number of times, most frequent first, and every occurrence of them, line
// after line. Rarer words are dropped from the lines, as word2vec does.
type Corpus struct {
	Words  []string
	Counts []int64
	Tokens []int32 // word ids, the lines one after the other
	Ends   []int   // each line's end in Tokens
}

// ReadCorpus reads r, one text a line, words separated by white space, and
// keeps the words seen at least minCount times. Ties in frequency keep the
// order of first appearance, so the ids do not depend on a map's order.
func ReadCorpus(r io.Reader, minCount int) (*Corpus, error) {
	ids := map[string]int32{}
	var (
		words  []string
		counts []int64
		tokens []int32
		ends   []int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		for _, w := range bytes.Fields(sc.Bytes()) {
			id, ok := ids[string(w)]
			if !ok {
				id = int32(len(words))
				s := string(w)
				ids[s] = id
				words = append(words, s)
				counts = append(counts, 0)
			}
			counts[id]++
			tokens = append(tokens, id)
		}
		ends = append(ends, len(tokens))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read corpus: %w", err)
	}
	order := make([]int32, 0, len(words))
	for id, n := range counts {
		if n >= int64(minCount) {
			order = append(order, int32(id))
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(counts[b], counts[a]) })
	remap := make([]int32, len(words))
	for i := range remap {
		remap[i] = -1
	}
	c := &Corpus{Words: make([]string, len(order)), Counts: make([]int64, len(order))}
	for i, id := range order {
		remap[id] = int32(i)
		c.Words[i], c.Counts[i] = words[id], counts[id]
	}
	// Rewrite the lines in place, dropping the rare words and empty lines.
	kept, start := 0, 0
	for _, end := range ends {
		from := kept
		for _, id := range tokens[start:end] {
			if n := remap[id]; n >= 0 {
				tokens[kept] = n
				kept++
			}
		}
		start = end
		if kept > from {
			c.Ends = append(c.Ends, kept)
		}
	}
	c.Tokens = slices.Clip(tokens[:kept])
	return c, nil
}

// Lines calls fn with each line's word ids.
func (c *Corpus) Lines(fn func(line []int32)) {
	start := 0
	for _, end := range c.Ends {
		fn(c.Tokens[start:end])
		start = end
	}
}
