// Package usage reads, from Go source, which declarations a piece of code
// refers to, so the retriever can count how often each declaration is used
// across the index. A question asked in a developer's words matches the doc
// comments of many declarations about equally; the one the code around it
// calls a hundred times (strings.Join, os.Exit) is far more often the one
// the developer means than a helper used once. It is plain Go: no index.
package usage

import (
	"go/scanner"
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Package returns the package name a Go file declares (its first
// "package x" line), or "" when it has none.
func Package(src string) string {
	for line := range strings.Lines(src) {
		if rest, ok := strings.CutPrefix(line, "package "); ok {
			name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			return name
		}
	}
	return ""
}

// Refs returns the distinct names a chunk of Go source in package pkg refers
// to, in order of first use:
//   - "x.Name" for a name qualified by one of the file's imports
//     (strings.Join);
//   - "pkg.Name" for an unqualified call or exported name, a use inside the
//     declaring package;
//   - ".Name" for any other selector that is called (b.WriteString()),
//     the only trace a method call leaves without type checking.
//
// The names a chunk declares are not uses and are left out. Comments and
// strings are skipped (go/scanner), and a chunk cut mid-declaration scans
// as well as it can: scan errors are ignored.
func Refs(pkg string, imports map[string]bool, src string) []string {
	toks := scan(src)
	decl := declared(toks)
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for i, t := range toks {
		if t.tok != token.IDENT || decl[i] {
			continue
		}
		prev, next := at(toks, i-1), at(toks, i+1)
		switch {
		case prev.tok == token.PERIOD:
			if q := at(toks, i-2); q.tok == token.IDENT && imports[q.lit] {
				add(q.lit + "." + t.lit)
			} else if next.tok == token.LPAREN {
				add("." + t.lit) // a method call (a field read is no use of a declaration)
			}
		case next.tok == token.PERIOD:
			// A qualifier: its name is counted with what it qualifies.
		case pkg != "" && (next.tok == token.LPAREN && !predeclared[t.lit] || exported(t.lit)):
			add(pkg + "." + t.lit)
		}
	}
	return out
}

// Imports returns the names a Go file's imports are known by (the alias,
// or the path's last element, a major version suffix skipped), read from
// the import declarations in src; the file's chunks up to its first
// declaration hold them all.
func Imports(src string) map[string]bool {
	out := map[string]bool{}
	toks := scan(src)
	for i := 0; i < len(toks); i++ {
		if toks[i].tok != token.IMPORT {
			continue
		}
		specs := toks[i+1:]
		if at(specs, 0).tok == token.LPAREN {
			specs = specs[1:]
		} else {
			specs = specs[:min(len(specs), 2)]
		}
		for j := 0; j < len(specs) && specs[j].tok != token.RPAREN; j++ {
			if specs[j].tok != token.STRING {
				continue
			}
			if a := at(specs, j-1); a.tok == token.IDENT {
				out[a.lit] = true
				continue
			}
			out[importName(strings.Trim(specs[j].lit, "`\""))] = true
		}
	}
	return out
}

// importName is the name an import path is known by without an alias:
// its last element, or the one before a major version suffix (v2).
func importName(p string) string {
	parts := strings.Split(p, "/")
	name := parts[len(parts)-1]
	if len(parts) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = parts[len(parts)-2]
	}
	return name
}

// Key returns the name under which uses of a chunk's declaration are
// counted, from the chunk's symbol as the chunker writes it: "pkg.Name" for
// a function or type ("func Join", "type Builder"), ".Name" for a method
// ("func (*Builder).WriteString"), whose uses are shared with every method
// of that name: Decl names the declaration so those can be counted too.
// Both are "" for a chunk that declares nothing.
func Key(pkg, symbol string) (key, decl string) {
	switch {
	case strings.HasPrefix(symbol, "func ("):
		if i := strings.LastIndex(symbol, ")."); i > 0 {
			name := symbol[i+2:]
			return "." + name, Decl(name)
		}
	case strings.HasPrefix(symbol, "func "):
		return pkg + "." + strings.TrimPrefix(symbol, "func "), ""
	case strings.HasPrefix(symbol, "type "):
		name, _, _ := strings.Cut(strings.TrimPrefix(symbol, "type "), ",")
		return pkg + "." + name, ""
	}
	return "", ""
}

// Decl is the key a method declaration named name is counted under: the
// uses of ".Name" are divided among the methods of that name.
func Decl(name string) string { return "=." + name }

type tok struct {
	tok token.Token
	lit string
}

func scan(src string) []tok {
	fs := token.NewFileSet()
	f := fs.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(f, []byte(src), func(token.Position, string) {}, 0)
	var out []tok
	for {
		_, t, lit := s.Scan()
		if t == token.EOF {
			return out
		}
		out = append(out, tok{t, lit})
	}
}

func at(toks []tok, i int) tok {
	if i < 0 || i >= len(toks) {
		return tok{}
	}
	return toks[i]
}

// declared marks the tokens that name a declaration: the identifier after
// "func", after a method's receiver, and after "type".
func declared(toks []tok) map[int]bool {
	out := map[int]bool{}
	for i, t := range toks {
		switch t.tok {
		case token.TYPE:
			if at(toks, i+1).tok == token.IDENT {
				out[i+1] = true
			}
		case token.FUNC:
			j := i + 1
			if at(toks, j).tok == token.LPAREN { // a receiver, or a func literal's parameters
				depth := 0
				for ; j < len(toks); j++ {
					if toks[j].tok == token.LPAREN {
						depth++
					} else if toks[j].tok == token.RPAREN {
						if depth--; depth == 0 {
							break
						}
					}
				}
				j++
			}
			if n := at(toks, j+1).tok; at(toks, j).tok == token.IDENT && (n == token.LPAREN || n == token.LBRACK) {
				out[j] = true
			}
		}
	}
	return out
}

func exported(name string) bool {
	r, _ := utf8.DecodeRuneInString(name)
	return unicode.IsUpper(r)
}

// predeclared are Go's builtin functions and conversions: calls to them are
// no use of a declaration of the package.
var predeclared = map[string]bool{
	"append": true, "cap": true, "clear": true, "close": true, "complex": true, "copy": true, "delete": true,
	"imag": true, "len": true, "make": true, "max": true, "min": true, "new": true, "panic": true,
	"print": true, "println": true, "real": true, "recover": true,
	"bool": true, "byte": true, "complex64": true, "complex128": true, "error": true, "float32": true,
	"float64": true, "int": true, "int8": true, "int16": true, "int32": true, "int64": true, "rune": true,
	"string": true, "uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "uintptr": true, "any": true,
}
