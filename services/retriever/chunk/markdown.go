package chunk

import "strings"

// splitMarkdown makes one piece per heading section (a heading and the text
// up to the next heading of any level), ignoring '#' lines inside fenced
// code; long sections go through the text splitter.
func splitMarkdown(content string) []Piece {
	ls := lines(content)
	var out []Piece
	start, heading := 0, ""
	inFence := false
	flush := func(end int) {
		if end > start {
			out = append(out, splitText(ls[start:end], start+1, heading)...)
		}
	}
	for i, l := range ls {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(l, "#") && strings.TrimLeft(l, "#") != l && (len(strings.TrimLeft(l, "#")) == 0 || strings.TrimLeft(l, "#")[0] == ' ') {
			flush(i)
			start, heading = i, strings.TrimSpace(l)
		}
	}
	flush(len(ls))
	return out
}
