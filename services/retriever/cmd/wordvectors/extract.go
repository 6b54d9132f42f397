package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aptix-dev/aptix/services/retriever/codetext"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
)

// extractor writes the corpus's lines with the analyser the index uses.
type extractor struct {
	an  analysis.Analyzer
	out *bufio.Writer
}

// emit writes the text's terms as the index analyses them, one line: a
// compound identifier stays before its words, as in the index, so its
// vector lies near the words a doc comment says it with.
func (x *extractor) emit(s string) {
	ts := x.an.Analyze([]byte(s))
	if len(ts) < 3 {
		return
	}
	for i, t := range ts {
		if i > 0 {
			x.out.WriteByte(' ')
		}
		x.out.Write(t.Term)
	}
	x.out.WriteByte('\n')
}

// extract writes the corpus of the Go and Markdown files under roots to w.
func extract(roots []string, w io.Writer) error {
	an, err := registry.NewCache().AnalyzerNamed(codetext.AnalyzerName)
	if err != nil {
		return fmt.Errorf("analyzer: %w", err)
	}
	for _, root := range roots {
		if _, err := os.Stat(root); err != nil {
			return err // not an empty corpus: a wrong path
		}
	}
	x := &extractor{an: an, out: bufio.NewWriterSize(w, 1<<20)}
	seen, emit := map[string]bool{}, x.emit // each text once
	for _, root := range roots {
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
	return x.out.Flush()
}
