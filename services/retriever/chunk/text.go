package chunk

import "strings"

// splitText cuts lines (the first of which is line first of the file) into
// pieces of at most MaxLines. It prefers to cut after a blank line or a line
// that closes a block at the outermost brace depth, so a function or class in
// a brace language usually lands whole in one piece.
func splitText(ls []string, first int, symbol string) []Piece {
	var out []Piece
	start := 0
	depth := 0
	lastGood := -1 // index of the last line after which a cut is clean
	for i, l := range ls {
		depth += strings.Count(l, "{") - strings.Count(l, "}")
		if depth < 0 {
			depth = 0
		}
		t := strings.TrimSpace(l)
		if depth == 0 && (t == "" || strings.HasPrefix(t, "}") || strings.HasSuffix(t, "}")) {
			lastGood = i
		}
		if i-start+1 >= MaxLines {
			cut := i
			if lastGood >= start+MaxLines/4 {
				cut = lastGood
			}
			out = appendPiece(out, ls, start, cut+1, first, symbol)
			start = cut + 1
			lastGood = -1
		}
	}
	out = appendPiece(out, ls, start, len(ls), first, symbol)
	return out
}

// appendPiece adds ls[from:to] unless it is only blank lines, trimming
// blank lines at both ends so line numbers point at code.
func appendPiece(out []Piece, ls []string, from, to, first int, symbol string) []Piece {
	for from < to && strings.TrimSpace(ls[from]) == "" {
		from++
	}
	for to > from && strings.TrimSpace(ls[to-1]) == "" {
		to--
	}
	if from >= to {
		return out
	}
	p := piece(ls, from, to, symbol)
	p.StartLine += first - 1
	p.EndLine += first - 1
	return append(out, p)
}
