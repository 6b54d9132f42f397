package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// weatherParams is the compliance tests' get_weather parameters schema.
var weatherParams = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
	},
	"required": []any{"location"},
}

func weatherTool() map[string]any {
	return map[string]any{"type": "function", "name": "get_weather",
		"description": "Get the current weather for a location", "parameters": weatherParams}
}

// weatherQuestion is the compliance tests' question, as they send it: a
// model (and Aptix's sandbox, by its tool rule) answers it with a call.
const weatherQuestion = `What's the weather like in San Francisco?`

// toolCalling: a function_call item whose arguments fit the tool's schema
// and whose tool is echoed with strict set; then the tool's output, sent
// back with previous_response_id (openai-go) and as explicit history,
// yields a text answer.
func toolCalling(t *testing.T, s *suite) {
	r := s.create(t, map[string]any{"input": []any{userMsg(weatherQuestion)}, "tools": []any{weatherTool()}})
	calls := r.itemsOf("function_call")
	if len(calls) == 0 {
		t.Fatalf("no function_call item in %s", r.raw)
	}
	fc := calls[0]
	if fc.Name != "get_weather" || fc.CallID == "" {
		t.Fatalf("function_call %+v", fc)
	}
	checkArguments(t, fc.Arguments)
	if s.opts.Deterministic && !strings.Contains(fc.Arguments, `"location":"San Francisco"`) {
		t.Errorf("sandbox arguments %s do not carry the city the question names", fc.Arguments)
	}
	var echoed struct {
		Tools []map[string]any `json:"tools"`
	}
	_ = json.Unmarshal(r.raw, &echoed)
	if len(echoed.Tools) != 1 || echoed.Tools[0]["name"] != "get_weather" {
		t.Errorf("tools echoed as %v", echoed.Tools)
	} else if _, ok := echoed.Tools[0]["strict"].(bool); !ok {
		t.Errorf("echoed function tool has no boolean strict: %v", echoed.Tools[0])
	}

	const output = `{"temperature_c":18,"conditions":"fog"}`
	tool := responses.ToolParamOfFunction("get_weather", weatherParams, false)
	out := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	next, err := s.sdk.Responses.New(s.ctx(t), responses.ResponseNewParams{Model: s.model,
		PreviousResponseID: openai.String(r.ID), Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			out}}})
	if err != nil {
		t.Fatalf("function_call_output round: %v", err)
	}
	if next.Status != responses.ResponseStatusCompleted || next.OutputText() == "" {
		t.Fatalf("after the tool output: status %q text %q", next.Status, next.OutputText())
	}
	if s.opts.Deterministic && !strings.Contains(next.OutputText(), `returned "{\"temperature_c\":18,\"conditions\":\"fog\"}"`) {
		t.Errorf("sandbox reply does not quote the tool output: %q", next.OutputText())
	}

	replay := s.create(t, map[string]any{"tools": []any{weatherTool()}, "input": []any{
		userMsg(weatherQuestion), json.RawMessage(fc.raw),
		map[string]any{"type": "function_call_output", "call_id": fc.CallID, "output": output}}})
	completedWithMessage(t, replay)
	if len(replay.itemsOf("function_call")) != 0 {
		t.Errorf("the call was answered, yet it is called again: %s", replay.raw)
	}
}

// toolCallingStreaming: the function call's own events, with the checks of
// every stream (schemas, order, deltas adding up to the done arguments).
func toolCallingStreaming(t *testing.T, s *suite) {
	st, final := s.stream(t, map[string]any{"input": []any{userMsg(weatherQuestion)}, "tools": []any{weatherTool()}})
	seen := map[string]bool{}
	for _, ev := range st.Events {
		var e struct {
			Item struct {
				Type string `json:"type"`
			} `json:"item"`
		}
		_ = json.Unmarshal(ev.Data, &e)
		seen[ev.Type+"/"+e.Item.Type] = true
	}
	for _, want := range []string{"response.output_item.added/function_call", "response.function_call_arguments.delta/",
		"response.function_call_arguments.done/", "response.output_item.done/function_call"} {
		if !seen[want] {
			t.Errorf("no %s event; types: %v", strings.TrimSuffix(want, "/"), types(st))
		}
	}
	calls := final.itemsOf("function_call")
	if len(calls) == 0 {
		t.Fatalf("final response has no function_call: %s", final.raw)
	}
	checkArguments(t, calls[0].Arguments)
}

// checkArguments validates a call's arguments against get_weather's schema.
func checkArguments(t *testing.T, args string) {
	t.Helper()
	b, _ := json.Marshal(weatherParams)
	if err := ValidateAgainst(string(b), args); err != nil {
		t.Errorf("arguments do not fit get_weather's parameters: %v", err)
	}
}

// functionCallRoundTrip: a call forced by a named tool_choice, then its
// output sent back by previous_response_id alone (no tools) yields a
// completed text answer.
func functionCallRoundTrip(t *testing.T, s *suite) {
	first := s.create(t, map[string]any{"input": "Use the weather tool to get the temperature in San Francisco.",
		"tools": []any{weatherTool()}, "tool_choice": map[string]any{"type": "function", "name": "get_weather"}})
	calls := first.itemsOf("function_call")
	if len(calls) == 0 || calls[0].CallID == "" {
		t.Fatalf("no function_call with a call_id in %s", first.raw)
	}
	checkArguments(t, calls[0].Arguments)
	second := s.create(t, map[string]any{"previous_response_id": first.ID, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": calls[0].CallID, "output": "64 degrees and clear"}}})
	completedWithMessage(t, second)
	if s.opts.Deterministic && !strings.Contains(second.text(), `returned "64 degrees and clear"`) {
		t.Errorf("sandbox reply does not quote the tool output: %q", second.text())
	}
}
