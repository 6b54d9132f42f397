package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
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

// functionTools are the request's function tools as the answering rules
// read them.
func functionTools(tools []tool) []reply.Tool {
	var out []reply.Tool
	for _, t := range tools {
		if t.Type == "function" {
			out = append(out, reply.Tool{Name: t.Name, Description: deref(t.Description, ""), Parameters: []byte(t.Parameters)})
		}
	}
	return out
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

// callID is deterministic per turn and marker: the same user message at the
// same place in the conversation always yields the same id, so a client that
// sends the output back (by previous_response_id or by replaying the items)
// is recognised, while the same marker in a later turn gets a new id.
func callID(turn int, userText string, idx int, m reply.Marker) string {
	h := sha256.Sum256([]byte(strconv.Itoa(turn) + "\x00" + userText + "\x00" + strconv.Itoa(idx) + "\x00" + m.Name + "\x00" + m.Arguments))
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
	text := strings.Join(reply.OwnTexts(st.user.texts()), "\n")
	for idx, m := range reply.CallMarkers(text) {
		id := callID(st.userIndex, text, idx, m)
		if answered[id] {
			continue
		}
		st.pending = append(st.pending, functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed",
			CallID: id, Name: m.Name, Arguments: m.Arguments})
	}
	round := strconv.Itoa(len(st.outputs))
	for idx, m := range reply.RepeatMarkers(text) {
		st.pending = append(st.pending, functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "completed",
			CallID: callID(st.userIndex, text+"\x00repeat "+round, idx, m), Name: m.Name, Arguments: m.Arguments})
	}
	return st
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
