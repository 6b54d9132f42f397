package conformance_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
)

// mutate returns testdata/response.json with edit applied to its decoded form.
func mutate(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/response.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.Marshal(m)
	return out
}

func output(m map[string]any, i int) map[string]any { return m["output"].([]any)[i].(map[string]any) }

func TestResponseSchemaAcceptsAFullResponseAndRejectsGaps(t *testing.T) {
	var v conformance.Validator
	if err := v.Response(mutate(t, func(map[string]any) {})); err != nil {
		t.Fatalf("valid response rejected: %v", err)
	}
	tests := map[string]func(m map[string]any){
		"user missing":               func(m map[string]any) { delete(m, "user") },
		"completed_at missing":       func(m map[string]any) { delete(m, "completed_at") },
		"object wrong":               func(m map[string]any) { m["object"] = "chat.completion" },
		"output a string, not items": func(m map[string]any) { m["output"] = "Hi" },
		"usage without details":      func(m map[string]any) { delete(m["usage"].(map[string]any), "input_tokens_details") },
		"message without id":         func(m map[string]any) { delete(output(m, 0), "id") },
		"output_text without logprobs": func(m map[string]any) {
			delete(output(m, 0)["content"].([]any)[0].(map[string]any), "logprobs")
		},
		"function_call without call_id": func(m map[string]any) { delete(output(m, 1), "call_id") },
		"function tool without strict":  func(m map[string]any) { delete(m["tools"].([]any)[0].(map[string]any), "strict") },
		"text without format":           func(m map[string]any) { m["text"] = map[string]any{} },
		"status unknown":                func(m map[string]any) { m["status"] = "done" },
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			if err := v.Response(mutate(t, edit)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestEventSchemas(t *testing.T) {
	var v conformance.Validator
	resp := string(mutate(t, func(map[string]any) {}))
	good := []string{
		`{"type":"response.created","sequence_number":0,"response":` + resp + `}`,
		`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_1","output_index":1,"arguments":"{}"}`,
		`{"type":"error","sequence_number":5,"error":{"type":"server_error","code":null,"message":"boom","param":null}}`,
	}
	for _, ev := range good {
		if err := v.Event([]byte(ev)); err != nil {
			t.Errorf("valid event rejected: %v\n%s", err, ev)
		}
	}
	bad := map[string]string{
		"no sequence_number":      `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`,
		"delta without item_id":   `{"type":"response.output_text.delta","sequence_number":1,"output_index":0,"content_index":0,"delta":"Hi"}`,
		"created without fields":  `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response"}}`,
		"openai-style error":      `{"type":"error","sequence_number":1,"code":"server_error","message":"boom"}`,
		"unknown type":            `{"type":"response.tool_call","sequence_number":1}`,
		"item added without item": `{"type":"response.output_item.added","sequence_number":1,"output_index":0}`,
	}
	for name, ev := range bad {
		if err := v.Event([]byte(ev)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := v.Event([]byte(bad["unknown type"])); err == nil || !strings.Contains(err.Error(), "not an Open Responses streaming event") {
		t.Errorf("unknown type error %v", err)
	}
}

func TestCompactionAndErrorSchemas(t *testing.T) {
	var v conformance.Validator
	ok := `{"id":"resp_c","object":"response.compaction","created_at":1,"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2},
		"output":[{"id":"msg_1","type":"message","status":"completed","role":"user","content":[{"type":"input_text","text":"x"}]},{"id":"cmp_1","type":"compaction","encrypted_content":"abc"}]}`
	if err := v.Compaction([]byte(ok)); err != nil {
		t.Fatalf("valid compaction rejected: %v", err)
	}
	if err := v.Compaction([]byte(strings.Replace(ok, `"encrypted_content":"abc"`, `"summary":"abc"`, 1))); err == nil {
		t.Error("compaction item without encrypted_content accepted")
	}
	if err := v.Compaction([]byte(strings.Replace(ok, `"response.compaction"`, `"response"`, 1))); err == nil {
		t.Error("wrong object accepted")
	}
	if err := v.ErrorBody([]byte(`{"error":{"message":"m","type":"invalid_request_error","param":null,"code":null}}`)); err != nil {
		t.Errorf("valid error rejected: %v", err)
	}
	if err := v.ErrorBody([]byte(`{"detail":"nope"}`)); err == nil {
		t.Error("{detail} accepted as an OpenAI error body")
	}
}
