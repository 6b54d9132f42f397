package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseErrors: the gateway validates input parameters (docs/http-api.md#errors); the errors are
// OpenAI's (400, invalid_request_error, the parameter named).
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, body, param, code, msg string
	}{
		{"unknown parameter", `{"model":"m","input":"hi","temprature":1}`, "temprature", CodeUnknownParameter, "Unknown parameter: 'temprature'."},
		{"malformed JSON names the position", "{\"model\":\"m\",\n \"input\": hi}", "", CodeInvalidJSON, "at position 24 (line 2, column 11)"},
		{"not an object", `[1,2]`, "", CodeInvalidJSON, "must be a JSON object"},
		{"missing input", `{"model":"m"}`, "input", CodeMissingParameter, "'input'"},
		{"wrong type", `{"input":"hi","temperature":"hot","max_output_tokens":"x"}`, "max_output_tokens", CodeInvalidType, "expected an integer"},
		{"bad role", `{"input":[{"role":"robot","content":"x"}]}`, "input[0].role", CodeInvalidValue, "robot"},
		{"bad tool_choice", `{"input":"x","tool_choice":"sometimes"}`, "tool_choice", CodeInvalidValue, "sometimes"},
		{"function tool without name", `{"input":"x","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name", CodeMissingParameter, ""},
		{"both previous and conversation", `{"input":"x","previous_response_id":"resp_1","conversation":"c"}`, "conversation", "mutually_exclusive", ""},
		{"unknown aptix field", `{"input":"x","aptix":{"mood":"x"}}`, "aptix", CodeInvalidValue, "mood"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, e := Parse([]byte(tc.body))
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != 400 || e.Type != TypeInvalidRequest {
				t.Errorf("status %d type %s", e.Status, e.Type)
			}
			if got := deref(e.Param); got != tc.param {
				t.Errorf("param %q, want %q", got, tc.param)
			}
			if got := deref(e.Code); got != tc.code {
				t.Errorf("code %q, want %q", got, tc.code)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q lacks %q", e.Message, tc.msg)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestParseAliases: the HTTP API's own aliases (docs/http-api.md#creating-a-response) (system_prompt, max_tokens,
// tool_choice.function.name) mean OpenAI's; every tool_choice form is read.
func TestParseAliases(t *testing.T) {
	r, e := Parse([]byte(`{"model":"m","input":"hi","system_prompt":"Be brief.","max_tokens":64,"tool_choice":{"type":"function","function":{"name":"lookup"}},"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"temperature":0.3}`))
	if e != nil {
		t.Fatal(e)
	}
	if r.Instructions != "Be brief." || r.MaxOutputTokens != 64 || r.ToolChoice != "lookup" {
		t.Errorf("aliases: %+v", r)
	}
	if string(r.Fields["temperature"]) != "0.3" {
		t.Errorf("temperature not passed through: %s", r.Fields["temperature"])
	}
	for body, want := range map[string]string{
		`"auto"`: "auto", `"required"`: "required", `{"type":"none"}`: "none",
		`{"type":"function","name":"f"}`: "f", `{"type":"allowed_tools","mode":"required","tools":[]}`: "required",
		`{"type":"file_search"}`: "", `{"type":"web_search_preview"}`: "required", `{"type":"custom","name":"g"}`: "g",
	} {
		r, e := Parse([]byte(`{"input":"x","tool_choice":` + body + `}`))
		if e != nil || r.ToolChoice != want {
			t.Errorf("tool_choice %s → %q (%v), want %q", body, r.ToolChoice, e, want)
		}
	}
}

// TestToExecute: the instruction is the last user text; the client's items,
// image parts and unmodelled fields ride along for the envelope.
func TestToExecute(t *testing.T) {
	cases := []struct {
		name, body      string
		instruction     string
		item            int
		scope           string
		wantFieldsEmpty bool
	}{
		{"string input", `{"input":"Explain retries","aptix":{"mode":"ANALYZE","workspaceId":"ws","repo":"r","ragScope":"repo","tags":["a"],"activeFiles":["x.go"]}}`, "Explain retries", 0, "repo", true},
		{"last user message among items", `{"input":[{"role":"user","content":"first"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"role":"user","content":[{"type":"input_text","text":"second"},{"type":"input_image","image_url":"data:x"}]}],"top_p":0.5}`, "second", 2, "none", false},
		{"function_call_output round", `{"input":[{"type":"function_call_output","call_id":"call_1","output":"42"}],"previous_response_id":"resp_1"}`, "Function call outputs: call_1", -1, "none", true},
		{"image-only message", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:x"}]}]}`, "(see the attached input)", 0, "none", true},
		{"file_search names the workspace and filters", `{"input":"Where is the retry?","tools":[{"type":"file_search","vector_store_ids":["ws1"],"filters":{"type":"and","filters":[{"type":"eq","key":"repo","value":"aptix"},{"type":"in","key":"tags","value":["go","core"]}]}}]}`, "Where is the retry?", 0, "repo", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Parse([]byte(tc.body))
			if e != nil {
				t.Fatal(e)
			}
			req, e := ToExecute(r, Target{ConversationID: "c1", TurnID: "t1", Backend: "sandbox", Model: "sandbox-1"})
			if e != nil {
				t.Fatal(e)
			}
			if req.Instruction != tc.instruction || req.OpenAI.InstructionItem != tc.item || req.RagScope != tc.scope {
				t.Errorf("instruction %q item %d scope %q", req.Instruction, req.OpenAI.InstructionItem, req.RagScope)
			}
			if (len(req.OpenAI.Fields) == 0) != tc.wantFieldsEmpty {
				t.Errorf("fields %s", req.OpenAI.Fields)
			}
			var items []json.RawMessage
			if err := json.Unmarshal(req.OpenAI.Input, &items); err != nil || len(items) != len(r.Input) {
				t.Errorf("input items %s", req.OpenAI.Input)
			}
			if req.AgentContext.Backend != "sandbox" || req.ConversationId != "c1" || req.TurnId != "t1" {
				t.Errorf("target lost: %+v", req)
			}
		})
	}
}

// TestFileSearch: RAG from stock SDKs (docs/http-api.md#the-aptix-extension + AGN-002): a file_search
// tool makes the retriever run on the named workspace with its filters, and
// never reaches the upstream; bad stores and filters are 400s.
func TestFileSearch(t *testing.T) {
	r, e := Parse([]byte(`{"input":"q","tools":[{"type":"function","name":"f","parameters":{}},{"type":"file_search","vector_store_ids":["ws1"],"filters":{"type":"eq","key":"language","value":"Go"}}],"include":["file_search_call.results"]}`))
	if e != nil {
		t.Fatal(e)
	}
	req, e := ToExecute(r, Target{ConversationID: "c", TurnID: "t"})
	if e != nil {
		t.Fatal(e)
	}
	if req.WorkspaceId != "ws1" || req.Language != "Go" || req.RagScope != "workspace" || strings.Contains(req.ToolsJson, "file_search") || !strings.Contains(req.ToolsJson, `"f"`) {
		t.Errorf("request %+v", req)
	}
	meta, e := MetaFor(r)
	if e != nil || !meta.FileSearch || !meta.FileSearchResults || !strings.Contains(string(meta.Echo), "file_search") {
		t.Errorf("meta %+v %v", meta, e)
	}
	for _, bad := range []string{
		`{"type":"file_search","vector_store_ids":[]}`,
		`{"type":"file_search","vector_store_ids":["a b"]}`,
		`{"type":"file_search","vector_store_ids":["ws"],"filters":{"type":"gt","key":"repo","value":"x"}}`,
		`{"type":"file_search","vector_store_ids":["ws"],"filters":{"type":"eq","key":"owner","value":"x"}}`,
	} {
		if _, e := Parse([]byte(`{"input":"q","tools":[` + bad + `]}`)); e == nil || e.Status != 400 {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestKnownCoversTheSDK: every parameter openai-go v3 can send is accepted
// (and passed through), so no SDK field is an "unknown parameter".
func TestKnownCoversTheSDK(t *testing.T) {
	sdk := strings.Fields(`access_programs background context_management conversation include input instructions
max_output_tokens max_tool_calls metadata model moderation parallel_tool_calls previous_response_id prompt
prompt_cache_key prompt_cache_options prompt_cache_retention reasoning safety_identifier service_tier store
stream stream_options temperature text tool_choice tools top_logprobs top_p truncation user`)
	for _, p := range sdk {
		if !known[p] {
			t.Errorf("%s is not accepted", p)
		}
	}
}
