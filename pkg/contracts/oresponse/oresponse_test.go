package oresponse

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// bodies are real and odd upstream bodies: OpenAI-shaped ones as the
// sandbox and OpenAI send them, the Open Responses fixture, error bodies,
// and documents with unknown fields, nulls, whitespace, escapes and item
// types Aptix does not know.
var bodies = map[string]string{
	"sandbox": `{"id":"resp_0a1b","object":"response","created_at":1764967971,"status":"completed","model":"sandbox-1","output":[{"id":"msg_0a1b","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Retries back off <exponentially> & \u003cjitter\u003e.","annotations":[]}]}],"usage":{"input_tokens":42,"input_tokens_details":{"cached_tokens":8},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":49}}`,
	"openai-reasoning": `{
  "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
  "object": "response",
  "created_at": 1741476542,
  "status": "incomplete",
  "error": null,
  "incomplete_details": {"reason": "max_output_tokens"},
  "instructions": null,
  "max_output_tokens": 16,
  "model": "o3-2025-04-16",
  "output": [
    {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA=="}
  ],
  "parallel_tool_calls": true,
  "previous_response_id": null,
  "reasoning": {"effort": "medium", "summary": null},
  "store": true,
  "temperature": 1.0,
  "text": {"format": {"type": "text"}},
  "tool_choice": "auto",
  "tools": [],
  "top_p": 1.0,
  "truncation": "disabled",
  "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 16}, "total_tokens": 52},
  "user": null,
  "metadata": {}
}`,
	"failed":       `{"id":"resp_f","object":"response","status":"failed","error":{"code":"server_error","message":"The model crashed."},"output":[]}`,
	"numeric-code": `{"error":{"message":"Too many","type":"requests","param":null,"code":429}}`,
	"fastapi":      `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`,
	"chat-usage":   `{"id":"r","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"q\": \"a\"}","status":"completed"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":1}}}`,
	"unknown":      `{"id":"r","x_vendor":{"nested":[1,2.50,{"deep":null}]},"status":"completed","output":[{"type":"x_custom_item","id":7,"status":{"odd":true},"content":"not an array","payload":{"type":"message"}},{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}],"output_text":"duplicate","usage":null,"incomplete_details":null,"error":null,"created_at":1.7649e9,"object":null}`,
	"duplicates":   `{"status":"in_progress","status":"completed","output":[],"output":null}`,
	"null":         `null`,
	"empty":        `{}`,
	"refusal":      `{"status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"I can't."},{"type":"output_text","text":"Hi"}]}]}`,
}

func fixtures(t *testing.T) map[string]string {
	t.Helper()
	all := map[string]string{}
	for k, v := range bodies {
		all[k] = v
	}
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 3 {
		t.Fatal("testdata fixtures missing")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all[filepath.Base(f)] = string(b)
	}
	return all
}

// TestRoundTripByteForByte: every body, decoded then encoded, comes back
// byte for byte (directly, and inside a document through the v2 engine
// and encoding/json, which may only compact it), and each output item's
// bytes are the body's.
func TestRoundTripByteForByte(t *testing.T) {
	for name, body := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			r, err := ParseString(body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.MarshalJSON()
			if err != nil || string(got) != body {
				t.Fatalf("Marshal = %s, %v; want the body", got, err)
			}
			for i, it := range r.Output {
				if !bytes.Contains([]byte(body), it.Raw) || !json.Valid(it.Raw) {
					t.Fatalf("item %d's bytes %s are not the body's", i, it.Raw)
				}
			}
			type doc struct {
				Result *Response `json:"result"`
			}
			var d doc
			if err := json.Unmarshal([]byte(`{"result":`+body+`}`), &d); err != nil {
				t.Fatal(err)
			}
			v1, _ := json.Marshal(d)
			var compact bytes.Buffer
			_ = json.Compact(&compact, []byte(body))
			if body != "null" && !jsonEqual(t, v1, []byte(`{"result":`+compact.String()+`}`)) {
				t.Fatalf("encoding/json: %s", v1)
			}
			v2, err := jsonv2.Marshal(d, opts)
			if err != nil || (body != "null" && !jsonEqual(t, v2, v1)) {
				t.Fatalf("v2 engine: %s, %v", v2, err)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestTypedFields: the fields Aptix reads are decoded, whatever else the
// body holds, and leniently where Aptix does not read them.
func TestTypedFields(t *testing.T) {
	must := func(name string) *Response {
		r, err := ParseString(bodies[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	r := must("sandbox")
	if r.ID != "resp_0a1b" || r.Object != "response" || r.CreatedAt != 1764967971 || r.Status != "completed" || r.Model != "sandbox-1" {
		t.Fatalf("head: %+v", r)
	}
	if r.OutputText() != "Retries back off <exponentially> & <jitter>." || r.Output[0].Role != "assistant" || r.FinishReason() != FinishStop {
		t.Fatalf("text %q finish %q", r.OutputText(), r.FinishReason())
	}
	u := r.Usage
	if in, out := u.Tokens(); in != 42 || out != 7 || u.TotalTokens != 49 || u.InputTokensDetails.CachedTokens != 8 || u.OutputTokensDetails.ReasoningTokens != 3 {
		t.Fatalf("usage %+v", u)
	}
	r = must("openai-reasoning")
	if r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || string(r.IncompleteDetails.Raw) != `{"reason": "max_output_tokens"}` || r.FinishReason() != FinishLength {
		t.Fatalf("incomplete: %+v", r.IncompleteDetails)
	}
	if r.Error != nil || r.Output[0].Type != "reasoning" || r.Output[0].ID != "rs_1" {
		t.Fatalf("error %+v, item %+v", r.Error, r.Output[0])
	}
	r = must("failed")
	if r.Error.CodeString() != "server_error" || r.Error.Message != "The model crashed." || r.FinishReason() != FinishError || r.Output == nil {
		t.Fatalf("failed: %+v", r.Error)
	}
	r = must("numeric-code")
	if r.Error.CodeString() != "429" || r.Error.Type != "requests" || r.Error.Param != nil {
		t.Fatalf("numeric code: %+v", r.Error)
	}
	r = must("rate-limited-param")
	_ = r
	r = must("fastapi")
	if string(r.Detail) != `[{"loc":["body","model"],"msg":"field required"}]` {
		t.Fatalf("detail %s", r.Detail)
	}
	r = must("chat-usage")
	f := r.Output[0]
	if f.CallID != "call_1" || f.Name != "lookup" || f.Arguments != `{"q": "a"}` || r.FinishReason() != FinishToolUse {
		t.Fatalf("function call %+v", f)
	}
	if in, out := r.Usage.Tokens(); in != 3 || out != 4 || r.Usage.PromptTokensDetails.CachedTokens != 1 {
		t.Fatalf("chat usage %+v", r.Usage)
	}
	r = must("unknown")
	if r.Output[0].Type != "x_custom_item" || r.Output[0].ID != "" || r.Output[1].ID != "ws_1" || r.Usage != nil || r.Error != nil || r.IncompleteDetails != nil || r.CreatedAt != 1764900000 || r.Object != "" {
		t.Fatalf("unknown: %+v", r)
	}
	r = must("duplicates")
	if r.Status != "completed" || r.Output != nil {
		t.Fatalf("duplicates: last value wins: %+v", r)
	}
	r = must("null")
	if r.Status != "" || r.Output != nil {
		t.Fatalf("null: %+v", r)
	}
	r = must("refusal")
	if r.Output[0].Content[0].Refusal != "I can't." || r.OutputText() != "Hi" {
		t.Fatalf("refusal: %+v", r.Output[0])
	}
	param := `{"error":{"message":"m","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	r, err := ParseString(param)
	if err != nil || r.Error.Param == nil || *r.Error.Param != "temperature" {
		t.Fatalf("param: %+v, %v", r, err)
	}
}

func init() {
	bodies["rate-limited-param"] = `{"error":{"message":"m","type":"t","param":null,"code":"rate_limit_exceeded"}}`
}

// TestParseRejects: what the mapper calls a malformed response.
func TestParseRejects(t *testing.T) {
	for name, body := range map[string]string{
		"not json":         `<html>502</html>`,
		"array":            `[{"id":"r"}]`,
		"truncated":        `{"id":"r","output":[`,
		"trailing":         `{"id":"r"} {}`,
		"status number":    `{"status":200}`,
		"output object":    `{"output":{"type":"message"}}`,
		"message content":  `{"output":[{"type":"message","content":"hi"}]}`,
		"item not object":  `{"output":["hi"]}`,
		"arguments object": `{"output":[{"type":"function_call","arguments":{}}]}`,
		"usage string":     `{"usage":{"input_tokens":"3"}}`,
		"empty":            ``,
	} {
		if r, err := ParseString(body); err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		}
	}
}

// TestBuiltInGo: a Response built in Go encodes its typed fields, and
// decoding that gives the same fields.
func TestBuiltInGo(t *testing.T) {
	r := &Response{ID: "r", Status: StatusCompleted, Model: "m",
		Output: []Item{{Type: TypeFunctionCall, ID: "fc", CallID: "c", Name: "f", Arguments: "{}"}},
		Usage:  &Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}, Error: &Error{Message: "x", Code: json.RawMessage(`"c"`)}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != "r" || back.Output[0].CallID != "c" || back.Usage.TotalTokens != 3 || back.Error.CodeString() != "c" || back.FinishReason() != FinishToolUse {
		t.Fatalf("%s decoded as %+v", b, back)
	}
}

// FuzzRoundTrip: whatever Parse accepts is valid JSON that Marshal gives
// back byte for byte, with the output items encoding/json sees, in order.
func FuzzRoundTrip(f *testing.F) {
	for _, b := range bodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, err := ParseString(body)
		if err != nil {
			return
		}
		if got, _ := r.MarshalJSON(); string(got) != body {
			t.Fatalf("Marshal = %q, want %q", got, body)
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var ref struct {
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal([]byte(body), &ref); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", body, err)
		}
		if len(ref.Output) != len(r.Output) {
			t.Fatalf("%d items, encoding/json sees %d", len(r.Output), len(ref.Output))
		}
		for i := range ref.Output {
			if !jsonEqual(t, ref.Output[i], r.Output[i].Raw) {
				t.Fatalf("item %d: %s, encoding/json: %s", i, r.Output[i].Raw, ref.Output[i])
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	body := []byte(bodies["sandbox"])
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaseline is the decode it replaces: the gateway's partial
// struct with output items as raw messages, through the same engine.
func BenchmarkBaseline(b *testing.B) {
	body := []byte(bodies["sandbox"])
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var up struct {
			Status string            `json:"status"`
			Model  string            `json:"model"`
			Output []json.RawMessage `json:"output"`
			Usage  *Usage            `json:"usage"`
		}
		if err := jsonv2.Unmarshal(body, &up, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseItem: an item a front door made decodes like a document's, and
// an Anthropic backend's reasoning item has its signature typed.
func TestParseItem(t *testing.T) {
	it, err := ParseItem([]byte(`{"type":"reasoning","id":"rs_1","encrypted_content":"sig","redacted":true,"content":[{"type":"reasoning_text","text":"hm"}]}`))
	if err != nil || it.EncryptedContent == nil || *it.EncryptedContent != "sig" || !it.Redacted || it.Content[0].Text != "hm" {
		t.Fatalf("%+v, %v", it, err)
	}
	it, err = ParseItem([]byte(`{"type":"message","content":[{"type":"output_text","text":"a"}],"stop_sequence":"END"}`))
	if err != nil || it.StopSequence == nil || *it.StopSequence != "END" {
		t.Fatalf("%+v, %v", it, err)
	}
	for _, bad := range []string{``, `[]`, `{"type":"message"`, `{"type":"message"} x`} {
		if _, err := ParseItem([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// BenchmarkReplaced compares one Parse with the decoders it replaced on a
// sandbox-shaped body with a 2 KB answer: the mapper's encoding/json
// decode of its partial struct, and the gateway's v2-engine decode of
// its own (output items as raw messages, which its Chat Completions and
// Messages doors then decoded again with encoding/json).
func BenchmarkReplaced(b *testing.B) {
	text, _ := json.Marshal(strings.Repeat("Retries back off exponentially with jitter <x> & y. ", 40))
	body := []byte(`{"id":"resp_0a1b","object":"response","created_at":1764967971,"status":"completed","model":"sandbox-1","output":[{"id":"msg_0a1b","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + string(text) + `,"annotations":[]}]}],"usage":{"input_tokens":42,"input_tokens_details":{"cached_tokens":8},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":49}}`)
	b.Run("oresponse", func(b *testing.B) {
		for b.Loop() {
			if _, err := Parse(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mapper-encoding-json", func(b *testing.B) {
		for b.Loop() {
			var r struct {
				ID                string                    `json:"id"`
				Model             string                    `json:"model"`
				Status            string                    `json:"status"`
				Error             *struct{ Message string } `json:"error"`
				IncompleteDetails *struct{ Reason string }  `json:"incomplete_details"`
				Output            []struct {
					Type, ID, CallID, Name, Arguments string
					Content                           []Part
				} `json:"output"`
				Usage  *Usage          `json:"usage"`
				Detail json.RawMessage `json:"detail"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gateway-v2-then-items-encoding-json", func(b *testing.B) {
		for b.Loop() {
			var up struct {
				Status string            `json:"status"`
				Model  string            `json:"model"`
				Output []json.RawMessage `json:"output"`
				Usage  *Usage            `json:"usage"`
			}
			if err := jsonv2.Unmarshal(body, &up, opts); err != nil {
				b.Fatal(err)
			}
			for _, raw := range up.Output {
				var it struct {
					Type    string `json:"type"`
					Content []Part `json:"content"`
				}
				_ = json.Unmarshal(raw, &it)
			}
		}
	})
}
