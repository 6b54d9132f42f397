package toolemu

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// response builds a /responses body whose output is a reasoning item and
// an assistant message with the given output_text parts.
func response(texts ...string) []byte {
	var parts []map[string]any
	for _, t := range texts {
		parts = append(parts, map[string]any{"type": "output_text", "text": t, "annotations": []any{}})
	}
	b, _ := json.Marshal(map[string]any{
		"id": "resp_1", "object": "response", "status": "completed", "model": "local-7b",
		"output": []any{
			map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}},
			map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": parts},
		},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
	})
	return b
}

type wireResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Usage  struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
	Output []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Role      string `json:"role"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

func decodeResponse(t *testing.T, body []byte) wireResponse {
	t.Helper()
	var r wireResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("rewritten body is not JSON: %v\n%s", err, body)
	}
	return r
}

func TestRewriteTextAndCalls(t *testing.T) {
	p := newTestParser(t, Choice{})
	body := response("Checking the tree.\n<tool_call>{\"name\":\"getFileTree\",\"arguments\":\"{}\"}</tool_call>\n" +
		`<tool_call>{"name":"webSearch","arguments":{"query":"go fuzz"}}</tool_call>`)
	rw, err := p.Rewrite(body)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResponse(t, rw.Body)
	if r.ID != "resp_1" || r.Status != "completed" || r.Usage.TotalTokens != 15 {
		t.Fatalf("top-level fields lost: %s", rw.Body)
	}
	types := []string{}
	for _, o := range r.Output {
		types = append(types, o.Type)
	}
	if !reflect.DeepEqual(types, []string{"reasoning", "message", "function_call", "function_call"}) {
		t.Fatalf("output items %v", types)
	}
	msg := r.Output[1]
	if msg.ID != "msg_1" || len(msg.Content) != 1 || msg.Content[0].Text != "Checking the tree.\n\n" {
		t.Fatalf("message %+v", msg)
	}
	for i, want := range []wantCall{{"getFileTree", "{}"}, {"webSearch", `{"query":"go fuzz"}`}} {
		fc := r.Output[2+i]
		if fc.Name != want.name || fc.Arguments != want.args || fc.Status != "completed" ||
			!strings.HasPrefix(fc.ID, "fc_") || fc.ID != rw.Calls[i].ItemID || fc.CallID != rw.Calls[i].ID || !strings.HasPrefix(fc.CallID, "call_") {
			t.Errorf("function_call %d: %+v", i, fc)
		}
	}
	if len(rw.Warnings) != 0 {
		t.Fatalf("warnings %q", rw.Warnings)
	}
}

// TestRewriteOnlyCalls: a message that was nothing but tool calls is
// dropped, so the mapper sees a tool-only answer.
func TestRewriteOnlyCalls(t *testing.T) {
	p := newTestParser(t, Choice{Mode: ChoiceRequired})
	rw, err := p.Rewrite(response("\n<tool_call>{\"name\":\"getFileTree\"}</tool_call>\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResponse(t, rw.Body)
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "function_call" || len(rw.Warnings) != 0 {
		t.Fatalf("output %+v, warnings %q", r.Output, rw.Warnings)
	}
}

// TestRewriteUnchanged: without accepted calls the body is left alone;
// warnings still say why a block stayed text, or that a choice was ignored.
func TestRewriteUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		choice Choice
		text   string
		warn   []string
	}{
		{"plain text", Choice{}, "Just text.", nil},
		{"unknown tool", Choice{}, `<tool_call>{"name":"rm_rf"}</tool_call>`, []string{`unknown tool "rm_rf"`}},
		{"tool_choice none", Choice{Mode: ChoiceNone}, `<tool_call>{"name":"getFileTree"}</tool_call>`, []string{"tool_choice is none"}},
		{"required ignored", Choice{Mode: ChoiceRequired}, "No.", []string{"tool_choice is required"}},
		{"forced ignored", Choice{Mode: ChoiceForced, Name: "getFileTree"}, "No.", []string{`tool_choice forces "getFileTree"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestParser(t, tc.choice)
			rw, err := p.Rewrite(response(tc.text))
			if err != nil || rw.Body != nil || len(rw.Calls) != 0 || len(rw.Warnings) != len(tc.warn) {
				t.Fatalf("%+v, %v", rw, err)
			}
			for i, w := range tc.warn {
				if !strings.Contains(rw.Warnings[i], w) {
					t.Errorf("warning %q, want %q", rw.Warnings[i], w)
				}
			}
		})
	}
}

// TestRewriteSeveralParts: each output_text part is parsed on its own; the
// required-choice check looks at the whole response.
func TestRewriteSeveralParts(t *testing.T) {
	p := newTestParser(t, Choice{Mode: ChoiceRequired})
	rw, err := p.Rewrite(response("first", `<tool_call>{"name":"getFileTree"}</tool_call>`, "third"))
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResponse(t, rw.Body)
	msg := r.Output[1]
	if len(msg.Content) != 2 || msg.Content[0].Text != "first" || msg.Content[1].Text != "third" || r.Output[2].Type != "function_call" || len(rw.Warnings) != 0 {
		t.Fatalf("%s %q", rw.Body, rw.Warnings)
	}
}

func TestRewriteLeavesOtherItems(t *testing.T) {
	p := newTestParser(t, Choice{})
	body := []byte(`{"id":"r","output":[{"type":"message","role":"user","content":[{"type":"output_text","text":"<tool_call>{\"name\":\"getFileTree\"}</tool_call>"}]},` +
		`{"type":"function_call","id":"fc_native","call_id":"call_native","name":"getFileTree","arguments":"{}"},{"type":"message","role":"assistant","content":"a string"}]}`)
	rw, err := p.Rewrite(body)
	if err != nil || rw.Body != nil {
		t.Fatalf("%s %v", rw.Body, err)
	}
	for _, bad := range []string{`not json`, `{"output":{}}`} {
		if _, err := p.Rewrite([]byte(bad)); err == nil {
			t.Errorf("Rewrite(%s): want an error", bad)
		}
	}
	if rw, err := p.Rewrite([]byte(`{"id":"r","status":"failed","output":null}`)); err != nil || rw.Body != nil {
		t.Fatalf("a response without output: %+v %v", rw, err)
	}
}
