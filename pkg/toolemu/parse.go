package toolemu

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The output contract of the seed: a tool call is a JSON object with "name"
// and "arguments" between these tags.
const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
)

// Call is one tool call found in the model's text.
type Call struct {
	// ID is the generated call_id ("call_" + random hex), which the client
	// echoes in its function_call_output as it would for a native call.
	ID   string
	Name string
	// Arguments is a JSON object: the model's string as written when it sent
	// one (repaired if it had to be), or the compacted object it sent instead.
	Arguments string
	// Start and End are the block's byte offsets, tags included, in the text.
	Start, End int
	// ItemID is the id of the function_call item Rewrite made of the call
	// ("fc_" + random hex); empty from Parse and Stream.
	ItemID string
}

// Result is what parsing a text yields.
type Result struct {
	// Text is the text outside the accepted <tool_call> blocks, exactly as
	// written; blocks that were not accepted stay in it verbatim.
	Text     string
	Calls    []Call
	Warnings []string
}

// Parser turns <tool_call> blocks into calls for one request's tools and
// tool_choice (the seed's allowedTools, strictTools/toolSchemas, and no
// parsing under tool_choice none). It is safe for concurrent use.
type Parser struct {
	tools  map[string]*validator // nil validator: not strict
	names  []string
	choice Choice
	newID  func(prefix string) string
}

// Option adjusts a Parser.
type Option func(*Parser)

// WithIDs replaces the random id generator (tests use a counter). It is
// called with "call_" for call ids and "fc_" for function_call item ids.
func WithIDs(newID func(prefix string) string) Option {
	return func(p *Parser) { p.newID = newID }
}

// NewParser prepares a parser. It fails on duplicate tool names, a forced
// choice naming no tool, or a strict tool whose schema does not compile:
// all of them are request errors, better reported before a call is paid for.
func NewParser(tools []Tool, choice Choice, opts ...Option) (*Parser, error) {
	p := &Parser{tools: map[string]*validator{}, choice: choice, newID: randomID}
	for _, t := range tools {
		if _, dup := p.tools[t.Name]; dup {
			return nil, fmt.Errorf("tool %q is defined twice", t.Name)
		}
		var v *validator
		if t.Strict {
			var err error
			if v, err = compileSchema(t.Name, t.Parameters); err != nil {
				return nil, err
			}
		}
		p.tools[t.Name] = v
		p.names = append(p.names, t.Name)
	}
	if choice.mode() == ChoiceForced {
		if _, ok := p.tools[choice.Name]; !ok {
			return nil, fmt.Errorf("tool_choice forces %q, which is not among the tools", choice.Name)
		}
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

func randomID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// enabled is false under tool_choice none: the seed disables parsing.
func (p *Parser) enabled() bool { return p.choice.mode() != ChoiceNone }

// Parse reads a whole answer's text.
func (p *Parser) Parse(text string) Result {
	r := p.parse(text)
	r.Warnings = append(r.Warnings, p.choiceWarnings(r.Calls)...)
	return r
}

// parse is Parse without the tool_choice checks, which Rewrite applies to
// a whole response rather than to each text part.
func (p *Parser) parse(text string) Result {
	if !p.enabled() {
		r := Result{Text: text}
		if strings.Contains(text, openTag) {
			r.Warnings = []string{noneWarning}
		}
		return r
	}
	var r Result
	var sb strings.Builder
	var c cursor
	for {
		seg, ok := p.step(text, &c, true)
		if !ok {
			break
		}
		seg.addTo(&r, &sb, 0)
	}
	r.Text = sb.String()
	return r
}

const noneWarning = "tool emulation: tool_choice is none, so <tool_call> output was left as text"

// choiceWarnings says when the model ignored a required or forced choice;
// the calls it made are kept either way.
func (p *Parser) choiceWarnings(calls []Call) []string {
	switch p.choice.mode() {
	case ChoiceRequired:
		if len(calls) == 0 {
			return []string{"tool emulation: tool_choice is required but the model emitted no <tool_call>"}
		}
	case ChoiceForced:
		for _, c := range calls {
			if c.Name == p.choice.Name {
				return nil
			}
		}
		return []string{fmt.Sprintf("tool emulation: tool_choice forces %q but the model did not call it", p.choice.Name)}
	}
	return nil
}

// cursor is how far parsing has got in a text that may still grow.
type cursor struct {
	pos int // start of the next segment
	// While the block starting at pos has not ended:
	inBlock    bool
	scan       int  // the next byte the search for its end reads
	inStr, esc bool // JSON string state at scan
}

// segment is one step's outcome: a run of visible text, an accepted call,
// or a block left as text with the reason.
type segment struct {
	text string
	call *Call
	warn string
}

func (s segment) addTo(r *Result, sb *strings.Builder, base int) {
	sb.WriteString(s.text)
	if s.call != nil {
		c := *s.call
		c.Start += base
		c.End += base
		r.Calls = append(r.Calls, c)
	}
	if s.warn != "" {
		r.Warnings = append(r.Warnings, s.warn)
	}
}

// step reads the segment at c.pos. Unless final, it reports false when what
// follows could still change meaning with more text: a tag cut off at the
// end, a block not yet closed, a closing tag that may yet be repeated. So a
// segment returned early is always the one a final read would return, which
// is what makes streaming agree with whole-text parsing.
func (p *Parser) step(s string, c *cursor, final bool) (segment, bool) {
	if !c.inBlock {
		rest := s[c.pos:]
		if rest == "" {
			return segment{}, false
		}
		i := strings.Index(rest, openTag)
		switch {
		case i > 0:
			c.pos += i
			return segment{text: rest[:i]}, true
		case i < 0 && final:
			c.pos = len(s)
			return segment{text: rest}, true
		case i < 0:
			n := len(rest) - partialSuffix(rest, openTag)
			if n == 0 {
				return segment{}, false
			}
			c.pos += n
			return segment{text: rest[:n]}, true
		}
		*c = cursor{pos: c.pos, inBlock: true, scan: c.pos + len(openTag)}
	}

	start, bodyStart := c.pos, c.pos+len(openTag)
	bodyEnd, end, ok := c.findEnd(s, final)
	if !ok {
		return segment{}, false
	}
	if end > bodyEnd { // closed by a tag: swallow repeats of it ("</tool_call></tool_call>")
		for {
			k := end
			for k < len(s) && isSpace(s[k]) {
				k++
			}
			rest := s[k:]
			if strings.HasPrefix(rest, closeTag) {
				end = k + len(closeTag)
				continue
			}
			if !final && len(rest) < len(closeTag) && strings.HasPrefix(closeTag, rest) {
				return segment{}, false
			}
			break
		}
	}
	*c = cursor{pos: end}

	call, err := p.decode(s[bodyStart:bodyEnd])
	if err != nil {
		return segment{text: s[start:end], warn: "tool emulation: a <tool_call> block was left as text: " + err.Error()}, true
	}
	call.Start, call.End = start, end
	return segment{call: &call}, true
}

// findEnd finds where the block's body ends: at the first closing tag
// outside a JSON string (so "</tool_call>" inside an argument value does not
// end it), or where a new <tool_call> opens. If the text ends first, a final
// read falls back to the first closing tag anywhere (the JSON's quotes were
// unbalanced), else to the end of the text (an unclosed final block).
// end is bodyEnd plus the closing tag, or bodyEnd when there is none.
func (c *cursor) findEnd(s string, final bool) (bodyEnd, end int, ok bool) {
	for ; c.scan < len(s); c.scan++ {
		ch := s[c.scan]
		if c.inStr {
			switch {
			case c.esc:
				c.esc = false
			case ch == '\\':
				c.esc = true
			case ch == '"':
				c.inStr = false
			}
			continue
		}
		if ch == '"' {
			c.inStr = true
			continue
		}
		if ch != '<' {
			continue
		}
		rest := s[c.scan:]
		if strings.HasPrefix(rest, closeTag) {
			return c.scan, c.scan + len(closeTag), true
		}
		if strings.HasPrefix(rest, openTag) {
			return c.scan, c.scan, true
		}
		if !final && (isPartial(rest, closeTag) || isPartial(rest, openTag)) {
			return 0, 0, false // resume here once more text arrives
		}
	}
	if !final {
		return 0, 0, false
	}
	bodyStart := c.pos + len(openTag)
	body := s[bodyStart:]
	k, o := strings.Index(body, closeTag), strings.Index(body, openTag)
	switch {
	case o >= 0 && (k < 0 || o < k):
		return bodyStart + o, bodyStart + o, true
	case k >= 0:
		return bodyStart + k, bodyStart + k + len(closeTag), true
	}
	return len(s), len(s), true
}

// isPartial reports whether s is a proper prefix of tag.
func isPartial(s, tag string) bool { return len(s) < len(tag) && strings.HasPrefix(tag, s) }

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag: text that may turn out to be the start of a tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// decode turns a block's body into a call, or says why it is not one.
func (p *Parser) decode(body string) (Call, error) {
	obj, err := callObject(body)
	if err != nil {
		return Call{}, err
	}
	var name string
	if raw, ok := obj["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return Call{}, errors.New(`its JSON has no "name" string`)
	}
	strict, known := p.tools[name]
	if !known {
		return Call{}, fmt.Errorf("unknown tool %q (the request offers: %s)", name, strings.Join(p.names, ", "))
	}
	args, err := arguments(obj["arguments"])
	if err != nil {
		return Call{}, fmt.Errorf("tool %q: %w", name, err)
	}
	if strict != nil {
		if err := strict.validate(args); err != nil {
			return Call{}, fmt.Errorf("strict tool %q: arguments do not match its schema: %w", name, err)
		}
	}
	return Call{ID: p.newID("call_"), Name: name, Arguments: args}, nil
}

// callObject reads the JSON object of a block, undoing what models get
// wrong despite the instructions: a code fence around it, a stray ">"
// before it, a one-element array around it, trailing commas, and stray
// ">", "]" or "}" after it.
func callObject(body string) (map[string]json.RawMessage, error) {
	t := strings.TrimLeft(stripFence(strings.TrimSpace(body)), "> \t\r\n")
	if t == "" {
		return nil, errors.New("the block is empty")
	}
	raw, err := repairJSON(t)
	if err != nil && t[0] == '[' { // "[{…}" whose "]" is missing
		raw, err = repairJSON(t[1:])
	}
	if err != nil {
		return nil, err
	}
	if raw[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal([]byte(raw), &elems); err != nil {
			return nil, fmt.Errorf("the block is not JSON: %w", err)
		}
		if len(elems) != 1 {
			return nil, fmt.Errorf("the block holds an array of %d elements, want one call object", len(elems))
		}
		raw = string(elems[0])
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
		return nil, errors.New("the block's JSON is not an object")
	}
	return obj, nil
}

// stripFence removes a Markdown code fence (```json … ```) around t.
func stripFence(t string) string {
	rest, ok := strings.CutPrefix(t, "```")
	if !ok {
		return t
	}
	if i := strings.IndexAny(rest, "\n{["); i >= 0 { // skip the info string ("json")
		rest = rest[i:]
	}
	rest = strings.TrimSpace(rest)
	return strings.TrimSpace(strings.TrimSuffix(rest, "```"))
}

// arguments normalizes the "arguments" value: absent, null or an empty
// string is "{}"; a string must hold a JSON object and is kept as written
// when it is valid; an object is compacted.
func arguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		t := strings.TrimSpace(s)
		if t == "" {
			return "{}", nil
		}
		if !json.Valid([]byte(t)) {
			fixed, err := repairJSON(t)
			if err != nil {
				return "", fmt.Errorf("the arguments string is not JSON: %w", err)
			}
			s, t = fixed, fixed
		}
		if t[0] != '{' {
			return "", errors.New("the arguments string does not hold a JSON object")
		}
		return s, nil
	case '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", fmt.Errorf("arguments: %w", err)
		}
		return buf.String(), nil
	}
	return "", errors.New("arguments must be a JSON object or a string holding one")
}

// repairJSON returns the first JSON value of t after removing trailing
// commas, allowing only stray ">", "]" and "}" (and spaces) after it.
func repairJSON(t string) (string, error) {
	t = dropTrailingCommas(t)
	dec := json.NewDecoder(strings.NewReader(t))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return "", fmt.Errorf("the block is not JSON: %w", err)
	}
	if rest := t[dec.InputOffset():]; strings.Trim(rest, " \t\r\n>]}") != "" {
		return "", fmt.Errorf("unexpected text after the JSON: %q", clip(strings.TrimSpace(rest), 40))
	}
	return string(raw), nil
}

// dropTrailingCommas removes commas that directly precede "}" or "]"
// outside strings; valid JSON has none, so valid input is unchanged.
func dropTrailingCommas(t string) string {
	if !strings.Contains(t, ",") {
		return t
	}
	var sb strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(t); i++ {
		ch := t[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			}
		} else if ch == '"' {
			inStr = true
		} else if ch == ',' {
			j := i + 1
			for j < len(t) && isSpace(t[j]) {
				j++
			}
			if j < len(t) && (t[j] == '}' || t[j] == ']') {
				continue
			}
		}
		sb.WriteByte(ch)
	}
	return sb.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
