package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aptix-dev/aptix/services/retriever/retrieval"
	"github.com/aptix-dev/aptix/services/retriever/skipgram"
)

// train learns vectors from a corpus file with skipgram's defaults (words
// seen fewer than 5 times dropped) and writes the words most frequent
// first, at most -words of them, skipping any too long for the format.
func train(args []string) error {
	fl := flag.NewFlagSet("train", flag.ExitOnError)
	words := fl.Int("words", 50000, "how many of the most frequent words to keep")
	seed := fl.Uint64("seed", 1, "the random seed")
	fl.Parse(args)
	if fl.NArg() != 2 || *words < 1 {
		usage()
	}
	f, err := os.Open(fl.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	c, err := skipgram.ReadCorpus(f, 5)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d lines, %d terms, %d distinct words seen 5 times or more (%s)\n", len(c.Ends), len(c.Tokens), len(c.Words), time.Since(start).Round(time.Second))
	cfg := skipgram.Defaults()
	cfg.Seed = *seed
	m, err := skipgram.Train(c, cfg, func(done float64) {
		fmt.Fprintf(os.Stderr, "\r%5.1f%% %s", 100*done, time.Since(start).Round(time.Second))
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr)
	var keep []string
	var data []float32
	for i, w := range c.Words {
		if len(keep) == *words {
			break
		}
		if len(w) <= 255 {
			keep = append(keep, w)
			data = append(data, m.Vector(i)...)
		}
	}
	var b bytes.Buffer
	if err := retrieval.EncodeVectors(&b, keep, m.Dim, data); err != nil {
		return err
	}
	return os.WriteFile(fl.Arg(1), b.Bytes(), 0o644)
}
