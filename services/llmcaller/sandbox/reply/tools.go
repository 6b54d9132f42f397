package reply

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Tool is a function tool as the rules read it.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (absent: an object).
	Parameters json.RawMessage
}

// Choice is a request's tool_choice.
type Choice struct {
	// Mode is "auto" (also when empty), "none", "required" or "function".
	Mode string
	// Name is the tool a "function" choice names.
	Name string
}

// Call is a function call the model makes.
type Call struct {
	Name      string
	Arguments string
}

// ToolCall decides the call a request gets when no [call:…] marker asks
// for one: the named tool (choice "function"), the best-matching tool or
// else the first (choice "required"), under "auto" the best-matching tool
// unless a tool's output already came back after the user's latest
// message (answered), and never under "none". text is the user's request
// (Request); the arguments are built from the tool's schema and text.
func ToolCall(text string, tools []Tool, c Choice, answered bool) (Call, bool, error) {
	var t *Tool
	switch c.Mode {
	case "none":
		return Call{}, false, nil
	case "function":
		for i := range tools {
			if tools[i].Name == c.Name {
				t = &tools[i]
				break
			}
		}
		if t == nil {
			return Call{}, false, fmt.Errorf("tool choice %q is not among the tools", c.Name)
		}
	case "required":
		if len(tools) == 0 {
			return Call{}, false, fmt.Errorf("tool choice required without a function tool")
		}
		t = &tools[0]
		if i, ok := Match(text, tools); ok {
			t = &tools[i]
		}
	default:
		if answered {
			return Call{}, false, nil
		}
		i, ok := Match(text, tools)
		if !ok {
			return Call{}, false, nil
		}
		t = &tools[i]
	}
	args, err := Arguments(t.Parameters, text)
	if err != nil {
		return Call{}, false, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return Call{Name: t.Name, Arguments: args}, true, nil
}

// Match returns the index of the tool the text asks for: the one sharing
// the most words with it, a word of the tool's name counting 3 and a word
// of its description 1, common words ("get", "the", "what"…) not counted.
// A tool needs 2 to be chosen (a word of its name, or two of its
// description); the first tool wins a tie.
func Match(text string, tools []Tool) (int, bool) {
	asked := map[string]bool{}
	for _, w := range words(text) {
		asked[w] = true
	}
	best, bestScore := -1, 1
	for i, t := range tools {
		name := map[string]bool{}
		for _, w := range words(t.Name) {
			name[w] = true
		}
		score := 0
		for w := range name {
			if asked[w] {
				score += 3
			}
		}
		seen := map[string]bool{}
		for _, w := range words(t.Description) {
			if asked[w] && !name[w] && !seen[w] {
				seen[w] = true
				score++
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best, best >= 0
}

// stopwords carry no meaning for matching: function words, and the verbs
// every tool name and request uses.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but if then than so of to in on at by for from with without into onto
		about as is are was were be been being am do does did done have has had it its it's this that these those there here
		i me my mine we us our you your yours he she him her his they them their what whats what's which who whom whose when
		where why how whether not no yes can could would should will shall may might must please thank thanks hi hello hey
		like just also very really some any all each every much many more most other such only own same too s t
		get gets set use using used call calls calling run make give tell show let need want know see find look
		tool tools function functions api current currently now today value values data info information thing things`) {
		stopwords[w] = true
	}
}

// words are the meaningful words of s for matching: split at non-letters
// and at camelCase, lower-cased, stemmed, stopwords dropped.
func words(s string) []string {
	var out []string
	var w []rune
	flush := func() {
		if len(w) > 0 {
			if x := stem(strings.ToLower(string(w))); len(x) > 1 && !stopwords[x] && !isNumber(x) {
				out = append(out, x)
			}
			w = w[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			w = append(w, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			w = append(w, r)
		case r == '\'' || r == '’':
			flush()
			prev = 0
			continue
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

func isNumber(s string) bool {
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// stem folds the common English endings, enough for "forecasts" to meet
// "forecast" and "searching" to meet "search".
func stem(w string) string {
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// Marker is one "[call:NAME {json}]" (or "[repeat:…]") in a user text:
// the sandbox's scripted tool rule, so tests and tool loops can ask for
// exact calls.
type Marker struct {
	Name, Arguments string
}

// CallMarkers finds every well-formed "[call:NAME {json}]" in text, in
// order. The JSON object is optional ("[call:ping]" calls ping with {}); a
// marker whose JSON does not parse is left alone, as plain text.
func CallMarkers(text string) []Marker { return markersAfter(text, "[call:") }

// RepeatMarkers are "[repeat:NAME {json}]": a model that calls NAME again
// on every round, however many outputs it got (a tool loop's depth limit
// is tested with it).
func RepeatMarkers(text string) []Marker { return markersAfter(text, "[repeat:") }

func markersAfter(text, prefix string) []Marker {
	var out []Marker
	for rest := text; ; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			return out
		}
		rest = rest[i+len(prefix):]
		m, n, ok := parseMarker(rest)
		if ok {
			out = append(out, m)
			rest = rest[n:]
		}
	}
}

// parseMarker reads "NAME {json}]" from s and returns the marker and the
// bytes it used.
func parseMarker(s string) (Marker, int, bool) {
	n := 0
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	if n == 0 {
		return Marker{}, 0, false
	}
	m := Marker{Name: s[:n], Arguments: "{}"}
	i := n
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i < len(s) && s[i] == '{' {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return Marker{}, 0, false
		}
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return Marker{}, 0, false
		}
		m.Arguments = buf.String()
		i += int(dec.InputOffset())
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	if i >= len(s) || s[i] != ']' {
		return Marker{}, 0, false
	}
	return m, i + 1, true
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
