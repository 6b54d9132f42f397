package toolemu

import "strings"

// compactAt is how many consumed bytes a Stream keeps before dropping them.
const compactAt = 4096

// Stream parses a text that arrives in pieces. Write returns the text that
// is now certain to be visible; anything that is or may become part of a
// <tool_call> block is held back, so a tag is never shown half and a call's
// JSON is never shown as text. Write's results plus Close's equal
// Parse(whole text).Text, and Result equals Parse's calls and warnings
// (ids aside). A Stream is not safe for concurrent use.
type Stream struct {
	p    *Parser
	buf  strings.Builder // unconsumed tail of the text (and some consumed bytes)
	base int             // offset of buf's first byte in the whole text
	c    cursor
	res  Result
	text strings.Builder // visible text so far
	// sawTag remembers a tag under tool_choice none, across pieces.
	tail   string
	sawTag bool
	closed bool
}

// Stream starts parsing a new text.
func (p *Parser) Stream() *Stream { return &Stream{p: p} }

// Write adds the next piece and returns the text it releases.
func (s *Stream) Write(piece string) string {
	if s.closed || piece == "" {
		return ""
	}
	if !s.p.enabled() {
		// No parsing under tool_choice none; only notice a tag for the warning.
		joined := s.tail + piece
		s.sawTag = s.sawTag || strings.Contains(joined, openTag)
		s.tail = joined[len(joined)-min(len(joined), len(openTag)-1):]
		s.text.WriteString(piece)
		return piece
	}
	s.buf.WriteString(piece)
	return s.drain(false)
}

// Close ends the text and returns what was still held back: text that
// turned out not to be a tag, and blocks that were left as text.
func (s *Stream) Close() string {
	if s.closed {
		return ""
	}
	var out string
	if s.p.enabled() {
		out = s.drain(true)
	} else if s.sawTag {
		s.res.Warnings = append(s.res.Warnings, noneWarning)
	}
	s.closed = true
	s.res.Warnings = append(s.res.Warnings, s.p.choiceWarnings(s.res.Calls)...)
	return out
}

// Result is the parse of the text written so far; complete after Close.
func (s *Stream) Result() Result {
	r := s.res
	r.Text = s.text.String()
	return r
}

func (s *Stream) drain(final bool) string {
	text := s.buf.String()
	var out strings.Builder
	for {
		seg, ok := s.p.step(text, &s.c, final)
		if !ok {
			break
		}
		seg.addTo(&s.res, &out, s.base)
	}
	if s.c.pos >= compactAt && s.c.pos > len(text)/2 {
		// Drop the consumed prefix so a long answer is not kept twice.
		n := s.c.pos
		s.buf.Reset()
		s.buf.WriteString(text[n:])
		s.base += n
		s.c.pos -= n
		if s.c.inBlock {
			s.c.scan -= n
		}
	}
	released := out.String()
	s.text.WriteString(released)
	return released
}
