package chunk

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// splitGo makes one piece per top-level function, method and type
// declaration, doc comment included, and groups what lies between them
// (package clause, imports, var and const blocks) into pieces of their own.
// A file that does not parse falls back to the text splitter (ok false).
func splitGo(content string) ([]Piece, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", content, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, false
	}
	ls := lines(content)
	var out []Piece
	next := 0 // first line (0-based) not yet in a piece
	gap := func(to int) {
		if to > next {
			out = append(out, splitText(ls[next:to], next+1, "")...)
		}
	}
	for _, d := range f.Decls {
		sym := ""
		var doc *ast.CommentGroup
		switch d := d.(type) {
		case *ast.FuncDecl:
			sym, doc = funcSymbol(d), d.Doc
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue // var/const/import stay with the surrounding gap
			}
			sym, doc = typeSymbol(d), d.Doc
		default:
			continue
		}
		from := fset.Position(d.Pos()).Line - 1
		if doc != nil {
			from = fset.Position(doc.Pos()).Line - 1
		}
		to := fset.Position(d.End()).Line
		if from < next {
			from = next
		}
		gap(from)
		if to-from > MaxLines {
			out = append(out, splitText(ls[from:to], from+1, sym)...)
		} else {
			out = appendPiece(out, ls, from, to, 1, sym)
		}
		next = to
	}
	gap(len(ls))
	return out, true
}

func funcSymbol(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return "func " + d.Name.Name
	}
	return "func (" + exprString(d.Recv.List[0].Type) + ")." + d.Name.Name
}

func typeSymbol(d *ast.GenDecl) string {
	names := make([]string, 0, len(d.Specs))
	for _, s := range d.Specs {
		if ts, ok := s.(*ast.TypeSpec); ok {
			names = append(names, ts.Name.Name)
		}
	}
	return "type " + strings.Join(names, ", ")
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return exprString(e.X)
	case *ast.IndexListExpr:
		return exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}
