package toolemu

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// streamPieces feeds pieces to a new Stream and returns what each Write
// released, what Close released, and the result.
func streamPieces(p *Parser, pieces []string) (released []string, tail string, r Result) {
	s := p.Stream()
	for _, piece := range pieces {
		released = append(released, s.Write(piece))
	}
	tail = s.Close()
	return released, tail, s.Result()
}

// checkStreamMatches asserts the streaming contract for one split of in:
// what was released, in order, is always a prefix of the whole-text result
// (so nothing shown is ever taken back, and no part of an accepted block is
// ever shown), and the end result equals Parse's.
func checkStreamMatches(t testing.TB, p *Parser, in string, pieces []string) {
	t.Helper()
	want := p.Parse(in)
	released, tail, got := streamPieces(p, pieces)
	var shown strings.Builder
	for i, r := range released {
		shown.WriteString(r)
		if !strings.HasPrefix(want.Text, shown.String()) {
			t.Fatalf("after piece %d of %q the stream showed %q, not a prefix of the parsed text %q", i, pieces, shown.String(), want.Text)
		}
	}
	shown.WriteString(tail)
	if shown.String() != want.Text || got.Text != want.Text {
		t.Fatalf("pieces %q: streamed text %q (result %q), parsed %q", pieces, shown.String(), got.Text, want.Text)
	}
	if !sameCalls(got.Calls, want.Calls) {
		t.Fatalf("pieces %q: streamed calls %+v, parsed %+v", pieces, got.Calls, want.Calls)
	}
	if !reflect.DeepEqual(got.Warnings, want.Warnings) {
		t.Fatalf("pieces %q: streamed warnings %q, parsed %q", pieces, got.Warnings, want.Warnings)
	}
}

// sameCalls compares calls without their (generated) ids.
func sameCalls(a, b []Call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.ID, y.ID = "", ""
		if x != y {
			return false
		}
	}
	return true
}

// TestStreamEverySplit runs every parse case cut at every byte into two
// pieces, and byte by byte.
func TestStreamEverySplit(t *testing.T) {
	p := newTestParser(t, Choice{})
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i <= len(tc.in); i++ {
				checkStreamMatches(t, p, tc.in, []string{tc.in[:i], tc.in[i:]})
			}
			checkStreamMatches(t, p, tc.in, strings.Split(tc.in, ""))
		})
	}
}

// TestStreamHoldsBackTags pins what is released when: text goes out at
// once, a possible tag waits for the bytes that decide it, and a call's
// JSON never goes out.
func TestStreamHoldsBackTags(t *testing.T) {
	p := newTestParser(t, Choice{})
	for _, tc := range []struct {
		name     string
		pieces   []string
		released []string
		tail     string
		calls    int
	}{
		{"plain text goes out at once", []string{"Hello ", "world"}, []string{"Hello ", "world"}, "", 0},
		{"a tag split across pieces", []string{"Hello <tool_", `call>{"name":"getFileTree"}</tool_`, "call> bye"}, []string{"Hello ", "", " bye"}, "", 1},
		{"a possible tag that is not one", []string{"a <", "b> <tool", "s>"}, []string{"a ", "<b> ", "<tools>"}, "", 0},
		{"a closing tag without an opening one is text", []string{"x</tool_call>"}, []string{"x</tool_call>"}, "", 0},
		{"the JSON of a call is never released", []string{"<tool_call>", `{"name":"writeToFile","arguments":{"path":"a","content":"`, "</tool_call> inside", `"}}`, "</tool_call>"},
			[]string{"", "", "", "", ""}, "", 1},
		{"a call at the very end waits for Close", []string{"ok ", `<tool_call>{"name":"getFileTree"}</tool_call>`}, []string{"ok ", ""}, "", 1},
		{"a rejected block is released whole", []string{`<tool_call>{"name":"nope"}`, "</tool_call>", "!"}, []string{"", "", `<tool_call>{"name":"nope"}</tool_call>!`}, "", 0},
		{"an unclosed block is released at Close", []string{"a ", `<tool_call>{"name":`}, []string{"a ", ""}, `<tool_call>{"name":`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			released, tail, r := streamPieces(p, tc.pieces)
			if !reflect.DeepEqual(released, tc.released) || tail != tc.tail || len(r.Calls) != tc.calls {
				t.Fatalf("released %q + %q with %d calls, want %q + %q with %d", released, tail, len(r.Calls), tc.released, tc.tail, tc.calls)
			}
		})
	}
}

// TestStreamToolChoiceNone: no parsing, so nothing is held back; the
// warning still notices a tag split across pieces.
func TestStreamToolChoiceNone(t *testing.T) {
	p := newTestParser(t, Choice{Mode: ChoiceNone})
	pieces := []string{"see <tool", `_call>{"name":"getFileTree"}</tool_call>`}
	released, tail, r := streamPieces(p, pieces)
	if !reflect.DeepEqual(released, pieces) || tail != "" || len(r.Calls) != 0 || len(r.Warnings) != 1 || r.Warnings[0] != noneWarning {
		t.Fatalf("released %q + %q, result %+v", released, tail, r)
	}
}

// TestStreamLongText crosses the compaction threshold with text and
// blocks, so offsets survive dropping the consumed prefix.
func TestStreamLongText(t *testing.T) {
	p := newTestParser(t, Choice{})
	call := `<tool_call>{"name":"writeToFile","arguments":{"path":"a.md","content":"` + strings.Repeat("z", 5000) + `"}}</tool_call>`
	in := strings.Repeat("text ", 1000) + call + strings.Repeat(" more", 1000) + call + "end"
	var pieces []string
	for i := 0; i < len(in); i += 7 {
		pieces = append(pieces, in[i:min(i+7, len(in))])
	}
	checkStreamMatches(t, p, in, pieces)
	r := p.Parse(in)
	if len(r.Calls) != 2 || in[r.Calls[1].Start:r.Calls[1].End] != call {
		t.Fatalf("calls %+v", r.Calls)
	}
}

// FuzzParse: parsing never panics; the visible text is exactly the input
// with the accepted blocks cut out; every call's arguments are a JSON
// object; streaming in any pieces gives the same result; and under
// tool_choice none the text passes through untouched.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in, []byte{3, 1, 4, 1, 5, 9, 2, 6})
	}
	f.Add("<tool_call><tool_call></tool_call></tool_call>", []byte{1})
	f.Add(`<tool_call>"</tool_call>"</tool_call>`, []byte{2, 2})
	p, err := NewParser(testTools, Choice{})
	if err != nil {
		f.Fatal(err)
	}
	none, err := NewParser(testTools, Choice{Mode: ChoiceNone})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string, cuts []byte) {
		r := p.Parse(in)
		var kept strings.Builder
		prev := 0
		for _, c := range r.Calls {
			if c.Start < prev || c.End <= c.Start || c.End > len(in) || !strings.HasPrefix(in[c.Start:], openTag) {
				t.Fatalf("call %+v has a bad span in %q", c, in)
			}
			kept.WriteString(in[prev:c.Start])
			prev = c.End
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.Arguments), &obj); err != nil || obj == nil {
				t.Fatalf("call %+v: arguments are not a JSON object", c)
			}
		}
		kept.WriteString(in[prev:])
		if kept.String() != r.Text {
			t.Fatalf("text outside the blocks not preserved:\n in %q\ngot %q\nwant %q", in, r.Text, kept.String())
		}
		if !strings.Contains(in, openTag) && (r.Text != in || len(r.Calls) != 0) {
			t.Fatalf("text without tags changed: %q → %q", in, r.Text)
		}

		var pieces []string
		rest := in
		for i := 0; rest != ""; i++ {
			n := 1
			if len(cuts) > 0 {
				n += int(cuts[i%len(cuts)]) % 24
			}
			n = min(n, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		checkStreamMatches(t, p, in, pieces)

		if nr := none.Parse(in); nr.Text != in || len(nr.Calls) != 0 {
			t.Fatalf("tool_choice none changed the text: %q → %q", in, nr.Text)
		}
		if released, tail, _ := streamPieces(none, pieces); strings.Join(released, "")+tail != in {
			t.Fatalf("tool_choice none streamed %q", strings.Join(released, "")+tail)
		}
	})
}
