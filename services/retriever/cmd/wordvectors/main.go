// Command wordvectors learns the retriever's word vectors
// (retrieval/wordvec.bin.gz), offline, in two steps. extract writes the
// corpus: every doc comment of the Go files under its arguments, after
// the name it documents, every other comment and every Markdown
// paragraph, each once, one line of terms as codetext analyses them.
// train learns skip-gram vectors from it (package skipgram, one
// goroutine, so the same corpus gives the same file) and writes the most
// frequent words' vectors in the embedded format. docs/retrieval.md
// ("Thirteenth pass") has the run.
//
//	wordvectors extract DIR... > corpus.txt
//	wordvectors train [-words 50000] [-seed 1] corpus.txt wordvec.bin.gz
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "extract":
		err = extract(os.Args[2:], os.Stdout)
	case "train":
		err = train(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wordvectors:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: wordvectors extract DIR... > corpus.txt\n       wordvectors train [-words N] [-seed N] corpus.txt wordvec.bin.gz")
	os.Exit(2)
}
