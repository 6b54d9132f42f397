package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"strconv"
	"strings"
)

// tool is one entry of the request's tools. Function tools may come flat
// (Responses) or nested under "function" (Chat Completions); both are read
// the same way. raw keeps the tool as sent, to echo tools of other types.
type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	raw         json.RawMessage
}

// UnmarshalJSON reads both function tool shapes and keeps the raw tool.
func (t *tool) UnmarshalJSON(b []byte) error {
	type flat tool
	var v struct {
		flat
		Function *flat `json:"function"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("decode tool: %w", err)
	}
	*t = tool(v.flat)
	if v.Function != nil && t.Name == "" {
		t.Name, t.Description, t.Parameters, t.Strict = v.Function.Name, v.Function.Description, v.Function.Parameters, v.Function.Strict
	}
	t.raw = append(json.RawMessage(nil), b...)
	return nil
}

// echoTools is the response's tools: function tools flat with every field
// the schema requires (description and parameters null when absent, strict
// set explicitly: true when absent, as OpenAI treats it), others as sent.
func echoTools(tools []tool) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		if t.Type != "function" {
			out = append(out, t.raw)
			continue
		}
		params := orNull(t.Parameters)
		b, err := json.Marshal(map[string]any{"type": "function", "name": t.Name, "description": t.Description,
			"parameters": params, "strict": deref(t.Strict, true)})
		if err != nil {
			continue
		}
		out = append(out, b)
	}
	return out
}

// marker is one "[call:NAME {json}]" in a user text (docs/sandbox.md): the
// sandbox's deterministic tool rule, so tests and tool loops can script calls.
type marker struct {
	name, arguments string
}

// callMarkers finds every well-formed marker in text, in order. The JSON
// object is optional ("[call:ping]" calls ping with {}); a marker whose JSON
// does not parse is left alone, as plain text.
func callMarkers(text string) []marker { return markersAfter(text, "[call:") }

// repeatMarkers are "[repeat:NAME {json}]": a model that calls NAME again
// on every round, however many outputs it got (a tool loop's depth limit
// is tested with it).
func repeatMarkers(text string) []marker { return markersAfter(text, "[repeat:") }

func markersAfter(text, prefix string) []marker {
	var out []marker
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
func parseMarker(s string) (marker, int, bool) {
	n := 0
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	if n == 0 {
		return marker{}, 0, false
	}
	m := marker{name: s[:n], arguments: "{}"}
	i := n
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i < len(s) && s[i] == '{' {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return marker{}, 0, false
		}
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return marker{}, 0, false
		}
		m.arguments = buf.String()
		i += int(dec.InputOffset())
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	if i >= len(s) || s[i] != ']' {
		return marker{}, 0, false
	}
	return m, i + 1, true
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// callID is deterministic per turn and marker: the same user message at the
// same place in the conversation always yields the same id, so a client that
// sends the output back (by previous_response_id or by replaying the items)
// is recognised, while the same marker in a later turn gets a new id.
func callID(turn int, userText string, idx int, m marker) string {
	h := sha256.Sum256([]byte(strconv.Itoa(turn) + "\x00" + userText + "\x00" + strconv.Itoa(idx) + "\x00" + m.name + "\x00" + m.arguments))
	return "call_" + hex.EncodeToString(h[:12])
}

// toolOutput is a function_call_output found in the conversation.
type toolOutput struct {
	callID, name, output string
}

// turnState is what the tool rule needs from the conversation: the latest
// user message, the calls its markers ask for that have no output yet, and
// the outputs that arrived after it.
type turnState struct {
	userIndex int
	user      item
	pending   []functionCallItem
	outputs   []toolOutput
}

// readTurn applies the tool rule to the whole conversation (stored history
// plus this request's input). An item that decoded only in part is read as
// far as it decoded.
func readTurn(chain []entry) turnState {
	st := turnState{userIndex: -1}
	for i, e := range chain {
		if e.it.Role == "user" && (e.it.Type == "" || e.it.Type == "message") {
			st.userIndex, st.user = i, e.it
		}
	}
	names := map[string]string{}
	answered := map[string]bool{}
	for i, e := range chain {
		switch it := e.it; it.Type {
		case "function_call":
			names[it.CallID] = it.Name
		case "function_call_output":
			answered[it.CallID] = true
			if i > st.userIndex {
				st.outputs = append(st.outputs, toolOutput{callID: it.CallID, output: outputString(it.Output)})
			}
		}
	}
	for i := range st.outputs {
		st.outputs[i].name = names[st.outputs[i].callID]
	}
	if st.userIndex < 0 {
		return st
	}
	text := strings.Join(ownTexts(st.user.texts()), "\n")
	for idx, m := range callMarkers(text) {
		id := callID(st.userIndex, text, idx, m)
		if answered[id] {
			continue
		}
		st.pending = append(st.pending, functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed",
			CallID: id, Name: m.name, Arguments: m.arguments})
	}
	round := strconv.Itoa(len(st.outputs))
	for idx, m := range repeatMarkers(text) {
		st.pending = append(st.pending, functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed",
			CallID: callID(st.userIndex, text+"\x00repeat "+round, idx, m), Name: m.name, Arguments: m.arguments})
	}
	return st
}

// ownTexts drops the AGN-002 [CONTEXT] parts: retrieved code that happens
// to contain a marker is the user's context, not the user's request.
func ownTexts(texts []string) []string {
	var out []string
	for _, t := range texts {
		if !strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			out = append(out, t)
		}
	}
	return out
}

// outputString is a function_call_output's output as text: the string
// itself, or the raw JSON of a content-part array.
func outputString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// quoteOutputs is the reply's sentence quoting each tool output, in order.
func quoteOutputs(outs []toolOutput) string {
	var b strings.Builder
	for _, o := range outs {
		name := o.name
		if name == "" {
			name = "unknown"
		}
		fmt.Fprintf(&b, " Tool %s (%s) returned %s.", name, o.callID, strconv.Quote(o.output))
	}
	return b.String()
}
