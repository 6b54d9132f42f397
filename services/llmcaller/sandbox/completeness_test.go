package sandbox_test

import (
	"encoding/json"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// requiredResponseFields is the Open Responses ResponseResource required
// list (public/openapi/openapi.json, 2026-04-24) plus "user".
var requiredResponseFields = strings.Fields(`id object created_at completed_at status incomplete_details model
	previous_response_id instructions output error tools tool_choice truncation parallel_tool_calls text top_p
	presence_penalty frequency_penalty top_logprobs temperature reasoning user usage max_output_tokens max_tool_calls
	store background service_tier metadata safety_identifier prompt_cache_key`)

func TestResponseCarriesEveryRequiredFieldAndEchoesSettings(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	body := `{"model":"m","input":"hi","instructions":"Be brief.","temperature":0.2,"top_p":0.9,"user":"u1",
		"metadata":{"k":"v"},"text":{"verbosity":"low"},"prompt_cache_key":"pk","safety_identifier":"s1","max_tool_calls":3,
		"tools":[{"type":"function","name":"flat","parameters":{"type":"object"}},
		         {"type":"function","function":{"name":"nested","description":"d","parameters":{"type":"object"},"strict":false}},
		         {"type":"web_search"}]}`
	resp, b, err := post(t, ts.URL, body, "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %s", err, b)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, f := range requiredResponseFields {
		if _, ok := got[f]; !ok {
			t.Errorf("field %q missing", f)
		}
	}
	want := map[string]string{
		"instructions": `"Be brief."`, "temperature": `0.2`, "top_p": `0.9`, "user": `"u1"`, "metadata": `{"k":"v"}`,
		"prompt_cache_key": `"pk"`, "safety_identifier": `"s1"`, "max_tool_calls": `3`, "truncation": `"disabled"`,
		"text":      `{"format":{"type":"text"},"verbosity":"low"}`,
		"reasoning": `{"effort":null,"summary":null}`, "service_tier": `"default"`, "background": `false`,
		"tools": `[{"description":null,"name":"flat","parameters":{"type":"object"},"strict":true,"type":"function"},` +
			`{"description":"d","name":"nested","parameters":{"type":"object"},"strict":false,"type":"function"},{"type":"web_search"}]`,
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	var out []struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Content []map[string]json.RawMessage
	}
	if err := json.Unmarshal(got["output"], &out); err != nil || len(out) != 1 {
		t.Fatalf("output %s", got["output"])
	}
	part := out[0].Content[0]
	if out[0].ID == "" || out[0].Status != "completed" || string(part["annotations"]) != "[]" || string(part["logprobs"]) != "[]" {
		t.Fatalf("message item %s", got["output"])
	}
	if string(got["completed_at"]) == "null" {
		t.Fatalf("completed response without completed_at")
	}
}

func TestImagesFilesAndAssistantPhase(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	body := `{"model":"m","input":[
		{"type":"message","role":"assistant","phase":"commentary","content":"Looking."},
		{"type":"message","role":"assistant","phase":"final_answer","content":"Done."},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Compare these"},
			{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},
			{"type":"input_image","file_id":"file-1","detail":"low"},
			{"type":"input_file","file_id":"file-2"}]}]}`
	r := postOK(t, ts.URL, body)
	if want := "Sandbox reply (mode unspecified) to: Compare these. Context chunks: none. Attachments: 2 image(s), 1 file(s)."; r.text(t) != want {
		t.Fatalf("text %q want %q", r.text(t), want)
	}
	for name, bad := range map[string]string{
		"phase on user":     `{"type":"message","role":"user","phase":"commentary","content":"x"}`,
		"unknown phase":     `{"type":"message","role":"assistant","phase":"thinking","content":"x"}`,
		"image without url": `{"type":"message","role":"user","content":[{"type":"input_image"}]}`,
	} {
		resp, b, err := post(t, ts.URL, `{"model":"m","input":[`+bad+`]}`, "")
		if err != nil || resp.StatusCode != 400 {
			t.Errorf("%s: status %v body %s", name, resp.StatusCode, b)
		}
	}
}

// POST /v1/responses/compact returns a response.compaction whose compaction
// item, passed back as input, shows up in the next reply.
func TestCompactionRoundTrip(t *testing.T) {
	keyA, keyB := sealbox.Generate(), sealbox.Generate()
	ringA, _ := sealbox.Parse(keyA)
	ts, _ := start(t, sandbox.Options{CompactionKeys: ringA})
	first := postOK(t, ts.URL, `{"model":"m","input":"We launch on Tuesday.\nSecond line"}`)
	resp, b, err := postPath(t, ts.URL+"/v1/responses/compact", `{"model":"m","previous_response_id":"`+first.ID+
		`","input":[{"type":"message","role":"user","content":"And notify support first."}]}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("compact: %v %s", err, b)
	}
	var c struct {
		ID        string            `json:"id"`
		Object    string            `json:"object"`
		CreatedAt int64             `json:"created_at"`
		Output    []json.RawMessage `json:"output"`
		Usage     struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Object != "response.compaction" || c.CreatedAt == 0 || c.Usage.TotalTokens < 2 || !strings.HasPrefix(c.ID, "resp_") {
		t.Fatalf("compaction %s", b)
	}
	// two user messages kept, then the compaction item
	if len(c.Output) != 3 || !strings.Contains(string(c.Output[2]), `"type":"compaction"`) || !strings.Contains(string(c.Output[0]), `"id":"msg_`) {
		t.Fatalf("output %s", b)
	}
	next := `{"model":"m","input":[` + string(c.Output[0]) + `,` + string(c.Output[1]) + `,` + string(c.Output[2]) +
		`,{"type":"message","role":"user","content":"What did we agree?"}]}`
	r := postOK(t, ts.URL, next)
	want := `Sandbox reply (mode unspecified) to: What did we agree?. Context chunks: none. Compacted history: 3 item(s), first user message "We launch on Tuesday.".`
	if r.text(t) != want {
		t.Fatalf("text %q\nwant %q", r.text(t), want)
	}
	var item struct {
		EncryptedContent string `json:"encrypted_content"`
	}
	_ = json.Unmarshal(c.Output[2], &item)
	if strings.Contains(item.EncryptedContent, "Tuesday") || !strings.HasPrefix(item.EncryptedContent, "sbxc2.") {
		t.Fatalf("the compaction item is readable: %s", item.EncryptedContent)
	}
	// Rotation: a server holding keys B,A opens what A sealed; one holding
	// only B, or a tampered item, is a 400 on the item.
	rotated, _ := sealbox.Parse(keyB + "," + keyA)
	onlyB, _ := sealbox.Parse(keyB)
	tampered := item.EncryptedContent[:len(item.EncryptedContent)-3] + "xyz"
	for name, tc := range map[string]struct {
		keys   *sealbox.Keyring
		blob   string
		status int
	}{
		"rotated keys B,A": {rotated, item.EncryptedContent, 200},
		"only key B":       {onlyB, item.EncryptedContent, 400},
		"tampered":         {ringA, tampered, 400},
	} {
		other, _ := start(t, sandbox.Options{CompactionKeys: tc.keys})
		resp, b, err := postPath(t, other.URL+"/v1/responses", `{"model":"m","input":[{"type":"compaction","encrypted_content":"`+tc.blob+`"},{"role":"user","content":"go on"}]}`)
		if err != nil || resp.StatusCode != tc.status {
			t.Errorf("%s: %v %d %s", name, err, resp.StatusCode, b)
		} else if tc.status == 200 && !strings.Contains(string(b), "first user message") {
			t.Errorf("%s: the compacted history did not arrive: %s", name, b)
		} else if tc.status == 400 && !strings.Contains(string(b), `"input[0].encrypted_content"`) {
			t.Errorf("%s: %s", name, b)
		}
	}

	for name, tc := range map[string]struct{ path, body, param string }{
		"compact without model":    {"/v1/responses/compact", `{"input":"x"}`, "model"},
		"compact unknown previous": {"/v1/responses/compact", `{"model":"m","previous_response_id":"resp_nope"}`, "previous_response_id"},
		"context_management type":  {"/v1/responses", `{"model":"m","input":"x","context_management":[{"type":"nope"}]}`, "context_management[0].type"},
		"compact_threshold 0":      {"/v1/responses", `{"model":"m","input":"x","context_management":[{"type":"compaction","compact_threshold":0}]}`, "context_management[0].compact_threshold"},
		"forged compaction item":   {"/v1/responses", `{"model":"m","input":[{"type":"compaction","encrypted_content":"xyz"}]}`, "input[0].encrypted_content"},
	} {
		resp, b, err := postPath(t, ts.URL+tc.path, tc.body)
		var e errBody
		if err != nil || resp.StatusCode != 400 || json.Unmarshal(b, &e) != nil || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s: %v %s", name, err, b)
		}
	}
}
