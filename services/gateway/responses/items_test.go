package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestInputItemsPage: List Input Items, in OpenAI's list shape:
// ids stable across replicas, string content as parts, limit/order/after.
func TestInputItemsPage(t *testing.T) {
	raw := []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":"one"}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":"two"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"call_1","output":"3"}`),
		json.RawMessage(`{"id":"msg_client","type":"message","role":"user","content":[{"type":"input_text","text":"four"}]}`),
	}
	items := InputItems("resp_abc", raw)
	if got := itemID(items[0]); got != "msg_abc_0" || itemID(items[2]) != "item_abc_2" || itemID(items[3]) != "msg_client" {
		t.Fatalf("ids %s %s %s", got, itemID(items[2]), itemID(items[3]))
	}
	if !strings.Contains(string(items[0]), `"content":[{"text":"one","type":"input_text"}]`) || !strings.Contains(string(items[1]), `"output_text"`) {
		t.Fatalf("content parts: %s / %s", items[0], items[1])
	}
	cases := []struct {
		limit, order, after string
		ids                 string
		more                bool
		bad                 string
	}{
		{"", "", "", "msg_client item_abc_2 msg_abc_1 msg_abc_0", false, ""},
		{"2", "asc", "", "msg_abc_0 msg_abc_1", true, ""},
		{"2", "asc", "msg_abc_1", "item_abc_2 msg_client", false, ""},
		{"1", "desc", "msg_client", "item_abc_2", true, ""},
		{"0", "", "", "", false, "limit"},
		{"", "sideways", "", "", false, "order"},
		{"", "", "msg_nope", "", false, "after"},
	}
	for _, tc := range cases {
		l, e := Page(items, tc.limit, tc.order, tc.after)
		if tc.bad != "" {
			if e == nil || deref(e.Param) != tc.bad {
				t.Errorf("%+v: want a 400 on %s, got %v", tc, tc.bad, e)
			}
			continue
		}
		var ids []string
		for _, it := range l.Data {
			ids = append(ids, itemID(it))
		}
		if e != nil || strings.Join(ids, " ") != tc.ids || l.HasMore != tc.more || l.Object != "list" || *l.FirstID != ids[0] || *l.LastID != ids[len(ids)-1] {
			t.Errorf("%+v: got %v more %v (%v)", tc, ids, l.HasMore, e)
		}
	}
}

// TestStatusOf: status is derived from the turn's stored events
// (docs/http-api.md#status): queued → in_progress.
func TestStatusOf(t *testing.T) {
	for stage, want := range map[string]string{"": StatusQueued, contracts.StageRequested: StatusQueued,
		contracts.StageRetrieved: StatusQueued, contracts.StageEnveloped: StatusInProgress, contracts.StageResponded: StatusInProgress} {
		if got := StatusOf(stage); got != want {
			t.Errorf("%q → %s, want %s", stage, got, want)
		}
	}
}
