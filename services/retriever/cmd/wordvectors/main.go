// Command wordvectors writes the corpus the retriever's word vectors are
// learned from (retrieval/wordvec.bin.gz): every doc comment of the Go
// files under its arguments, after the name it documents, every other
// comment and every Markdown paragraph, each once, one line of terms as
// codetext analyses them. train.py learns the vectors from it and writes
// the embedded file; docs/retrieval.md ("Twelfth pass") has the run.
//
//	wordvectors DIR... > corpus.txt
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aptix-dev/aptix/services/retriever/codetext"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
)

var (
	an  analysis.Analyzer
	out *bufio.Writer
)

// emit writes the text's terms as the index analyses them, one line: a
// compound identifier stays before its words, as in the index, so its
// vector lies near the words a doc comment says it with.
func emit(s string) {
	ts := an.Analyze([]byte(s))
	if len(ts) < 3 {
		return
	}
	for i, t := range ts {
		if i > 0 {
			out.WriteByte(' ')
		}
		out.Write(t.Term)
	}
	out.WriteByte('\n')
}

func main() {
	c := registry.NewCache()
	var err error
	an, err = c.AnalyzerNamed(codetext.AnalyzerName)
	if err != nil {
		panic(err)
	}
	out = bufio.NewWriterSize(os.Stdout, 1<<20)
	defer out.Flush()
	seen := map[string]bool{}
	for _, root := range os.Args[1:] {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if n := d.Name(); n == "vendor" || n == "testdata" || n == ".git" {
					return filepath.SkipDir
				}
				return nil
			}
			info, err := d.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() > 2<<20 {
				return nil
			}
			switch {
			case strings.HasSuffix(p, ".go"):
				fset := token.NewFileSet()
				f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
				if err != nil {
					return nil
				}
				docs := map[*ast.CommentGroup]bool{}
				name := func(cg *ast.CommentGroup, n string) {
					if cg == nil {
						return
					}
					docs[cg] = true
					t := cg.Text()
					if seen[n+t] {
						return
					}
					seen[n+t] = true
					emit(n + " " + t)
				}
				name(f.Doc, "package "+f.Name.Name)
				for _, decl := range f.Decls {
					switch d := decl.(type) {
					case *ast.FuncDecl:
						name(d.Doc, d.Name.Name)
					case *ast.GenDecl:
						for _, s := range d.Specs {
							switch s := s.(type) {
							case *ast.TypeSpec:
								doc := s.Doc
								if doc == nil && len(d.Specs) == 1 {
									doc = d.Doc
								}
								name(doc, s.Name.Name)
								if st, ok := s.Type.(*ast.StructType); ok {
									for _, fl := range st.Fields.List {
										if len(fl.Names) > 0 {
											name(fl.Doc, fl.Names[0].Name)
										}
									}
								}
								if it, ok := s.Type.(*ast.InterfaceType); ok {
									for _, fl := range it.Methods.List {
										if len(fl.Names) > 0 {
											name(fl.Doc, fl.Names[0].Name)
										}
									}
								}
							case *ast.ValueSpec:
								doc := s.Doc
								if doc == nil && len(d.Specs) == 1 {
									doc = d.Doc
								}
								name(doc, s.Names[0].Name)
							}
						}
					}
				}
				for _, cg := range f.Comments {
					if docs[cg] {
						continue
					}
					t := cg.Text()
					if strings.Contains(t, "Copyright") || seen[t] {
						continue
					}
					seen[t] = true
					emit(t)
				}
			case strings.HasSuffix(strings.ToLower(p), ".md"):
				b, _ := os.ReadFile(p)
				for _, para := range strings.Split(string(b), "\n\n") {
					if strings.HasPrefix(strings.TrimSpace(para), "```") {
						continue
					}
					emit(para)
				}
			}
			return nil
		})
	}
	fmt.Fprintf(os.Stderr, "%d texts\n", len(seen))
}
