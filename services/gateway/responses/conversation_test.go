package responses

import (
	"encoding/json"
	"strings"
	"testing"
)

func ids(items []json.RawMessage) string {
	var out []string
	for _, it := range items {
		out = append(out, itemID(it))
	}
	return strings.Join(out, " ")
}

// TestConversationEntries: a response's input is listed at once, its
// output lands after that input once settled, even when items were added
// in between; a response that never ran is withdrawn with its input;
// items of a pending response can be found and removed.
func TestConversationEntries(t *testing.T) {
	c := &Conversation{ID: "conv_1"}
	c.Append(InputItems("resp_a", []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"hi"}`)}))
	c.AppendPending(Meta{ID: "resp_r1", Echo: json.RawMessage(`{"big":true}`)},
		InputItems("resp_r1", []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"q1"}`)}))
	c.Append(InputItems("resp_b", []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"later"}`)}))
	if got := ids(c.Items()); got != "msg_a_0 msg_r1_0 msg_b_0" {
		t.Fatalf("items before settling: %s", got)
	}
	if p := c.Pending(); len(p) != 1 || p[0].ID != "resp_r1" || p[0].Echo != nil {
		t.Fatalf("pending %+v", p)
	}
	c.Settle("resp_r1", []json.RawMessage{json.RawMessage(`{"id":"msg_out","type":"message","role":"assistant","content":[{"type":"output_text","text":"a1"}]}`)})
	if got := ids(c.Items()); got != "msg_a_0 msg_r1_0 msg_out msg_b_0" || len(c.Pending()) != 0 {
		t.Fatalf("items after settling: %s (pending %d)", got, len(c.Pending()))
	}
	c.Settle("resp_r1", nil) // settled once only
	if got := ids(c.Items()); got != "msg_a_0 msg_r1_0 msg_out msg_b_0" {
		t.Fatalf("settled twice: %s", got)
	}

	c.AppendPending(Meta{ID: "resp_r2"}, InputItems("resp_r2", []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":"q2"}`), json.RawMessage(`{"type":"message","role":"user","content":"q2b"}`)}))
	if _, ok := c.Find("msg_r2_1"); !ok {
		t.Fatal("a pending response's input item is not found")
	}
	if !c.Remove("msg_r2_1") || c.Remove("msg_r2_1") || !c.Remove("msg_b_0") || c.Remove("nope") {
		t.Fatal("remove")
	}
	if got := ids(c.Items()); got != "msg_a_0 msg_r1_0 msg_out msg_r2_0" {
		t.Fatalf("after removals: %s", got)
	}
	if !c.Withdraw("resp_r2") || c.Withdraw("resp_r2") {
		t.Fatal("withdraw")
	}
	if got := ids(c.Items()); got != "msg_a_0 msg_r1_0 msg_out" {
		t.Fatalf("after withdrawing: %s", got)
	}
}

// TestContextItems: the model is shown messages and function calls and
// their outputs, without listing ids and statuses; Aptix's own tool items
// and reasoning are left out.
func TestContextItems(t *testing.T) {
	in := []json.RawMessage{
		json.RawMessage(`{"id":"msg_1","type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":"q"}]}`),
		json.RawMessage(`{"id":"mcpl_1","type":"mcp_list_tools","server_label":"aptix","tools":[]}`),
		json.RawMessage(`{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{}","status":"completed"}`),
		json.RawMessage(`{"id":"item_2","type":"function_call_output","call_id":"c1","output":"4"}`),
		json.RawMessage(`{"id":"rs_1","type":"reasoning","summary":[]}`),
		json.RawMessage(`not json`),
	}
	got := ContextItems(in)
	want := []string{
		`{"content":[{"type":"input_text","text":"q"}],"role":"user","type":"message"}`,
		`{"arguments":"{}","call_id":"c1","name":"f","type":"function_call"}`,
		`{"call_id":"c1","output":"4","type":"function_call_output"}`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d items: %s", len(got), got)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("item %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// TestConversationBodies: the create, update and append bodies, and what
// each refuses, in OpenAI's words.
func TestConversationBodies(t *testing.T) {
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 21), ",") + "]"
	bigMD := "{"
	for i := 0; i < 17; i++ {
		if i > 0 {
			bigMD += ","
		}
		bigMD += `"k` + strings.Repeat("x", i) + `":"v"`
	}
	bigMD += "}"
	cases := []struct {
		name, op, body string
		items          int
		param, code    string
	}{
		{"empty create", "create", ``, 0, "", ""},
		{"create with items and metadata", "create", `{"items":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":"yo"}],"metadata":{"topic":"x"}}`, 2, "", ""},
		{"create with null items", "create", `{"items":null}`, 0, "", ""},
		{"too many items", "create", `{"items":` + many + `}`, 0, "items", "array_above_max_length"},
		{"item without type or role", "create", `{"items":[{"content":"x"}]}`, 0, "items[0]", CodeMissingParameter},
		{"bad role", "append", `{"items":[{"role":"tool","content":"x"}]}`, 0, "items[0].role", CodeInvalidValue},
		{"items not an array", "create", `{"items":"hi"}`, 0, "items", CodeInvalidType},
		{"unknown parameter", "create", `{"itemz":[]}`, 0, "itemz", CodeUnknownParameter},
		{"not json", "create", `{`, 0, "", CodeInvalidJSON},
		{"metadata too big", "create", `{"metadata":` + bigMD + `}`, 0, "metadata", CodeInvalidValue},
		{"metadata key too long", "update", `{"metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 0, "metadata", CodeInvalidValue},
		{"metadata value too long", "update", `{"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, 0, "metadata", CodeInvalidValue},
		{"metadata not strings", "update", `{"metadata":{"k":1}}`, 0, "metadata", CodeInvalidType},
		{"update without metadata", "update", `{}`, 0, "metadata", CodeMissingParameter},
		{"update", "update", `{"metadata":{"k":"v"}}`, 0, "", ""},
		{"append", "append", `{"items":[{"role":"user","content":"x"}]}`, 1, "", ""},
		{"append nothing", "append", `{"items":[]}`, 0, "items", CodeInvalidValue},
		{"append without items", "append", `{}`, 0, "items", CodeMissingParameter},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var items []json.RawMessage
			var e *Error
			switch tc.op {
			case "create":
				items, _, e = ParseConversationCreate([]byte(tc.body), "resp_k")
			case "update":
				_, e = ParseConversationUpdate([]byte(tc.body))
			case "append":
				items, e = ParseItemsAppend([]byte(tc.body), "resp_k")
			}
			if tc.code == "" {
				if e != nil {
					t.Fatalf("refused: %s", e.Message)
				}
				if len(items) != tc.items {
					t.Fatalf("%d items, want %d", len(items), tc.items)
				}
				for i, it := range items {
					if itemID(it) == "" || !strings.Contains(string(it), `"type":"message"`) {
						t.Fatalf("item %d: %s", i, it)
					}
				}
				return
			}
			param := ""
			if e != nil && e.Param != nil {
				param = *e.Param
			}
			if e == nil || e.Status != 400 || *e.Code != tc.code || param != tc.param {
				t.Fatalf("want 400 %s %s, got %+v", tc.param, tc.code, e)
			}
		})
	}
}

// TestConversationIDsAndInclude: only conv_ ids that are subject tokens
// name a conversation object; include takes OpenAI's values only.
func TestConversationIDsAndInclude(t *testing.T) {
	for id, ok := range map[string]bool{
		"conv_0123abc": true, "conv_": false, "thread-7": false, "conv_a.b": false, "conv_a*": false,
		"conv_" + strings.Repeat("a", 200): false,
	} {
		if IsConversationID(id) != ok {
			t.Errorf("IsConversationID(%q) = %v", id, !ok)
		}
	}
	if CheckInclude([]string{"message.output_text.logprobs", "file_search_call.results"}) != nil {
		t.Fatal("valid include refused")
	}
	if e := CheckInclude([]string{"everything"}); e == nil || *e.Param != "include" {
		t.Fatal("unknown include accepted")
	}
}
