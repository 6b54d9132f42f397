package sandbox_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestOpenResponsesConformance runs the Open Responses conformance suite
// (the intent of the public HTTP compliance tests, every body and stream
// event schema-validated) against the sandbox, with its deterministic
// replies checked too.
func TestOpenResponsesConformance(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	conformance.Run(t, ts.URL+"/v1", "sandbox-1", conformance.Options{Deterministic: true})
}

// The sandbox's other streams (beyond the compliance tests' requests) obey
// the same rules: parallel calls, a truncated (incomplete) answer, a forced
// call, and a tool round's text answer.
func TestStreamsFollowOpenResponsesRules(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	var v conformance.Validator
	tools := `"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}]`
	tests := []struct {
		name, body, terminal string
		items                int
	}{
		{"parallel calls", `{"model":"m","stream":true,` + tools + `,"input":"[call:f {\"x\":1}] [call:f {\"x\":2}] [call:g]"}`, "response.completed", 3},
		{"incomplete", `{"model":"m","stream":true,"max_output_tokens":4,"input":"a long enough question to be cut"}`, "response.incomplete", 1},
		{"forced call", `{"model":"m","stream":true,` + tools + `,"tool_choice":"required","input":"go"}`, "response.completed", 1},
		{"tool output answered", `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":"What is f?"},` +
			`{"type":"function_call","call_id":"call_x","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_x","output":"ok"}]}`, "response.completed", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			st, err := conformance.ReadSSE(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.CheckEvents(st); err != nil {
				t.Error(err)
			}
			if err := conformance.CheckLifecycle(st); err != nil {
				t.Error(err)
			}
			last := st.Events[len(st.Events)-1]
			added := 0
			for _, ev := range st.Events {
				if ev.Type == "response.output_item.added" {
					added++
				}
				if ev.Type == "response.output_text.done" && tt.name == "tool output answered" && !strings.Contains(string(ev.Data), `Tool f (call_x) returned \"ok\".`) {
					t.Errorf("tool output not quoted: %s", ev.Data)
				}
			}
			if last.Type != tt.terminal || added != tt.items {
				t.Fatalf("terminal %s, %d items; want %s, %d", last.Type, added, tt.terminal, tt.items)
			}
		})
	}
}
