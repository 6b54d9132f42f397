package caller

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestKeptItemsSplicesAsItemsWould: the record recovery follows, with the input
// spliced in as it is, decodes to the items the link, the input split into
// items and the output would make.
func TestKeptItemsSplicesAsItemsWould(t *testing.T) {
	out := []json.RawMessage{json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`)}
	for name, raw := range map[string]string{
		"array":             `{"input":[{"role":"user","content":"a"},{"type":"function_call_output","call_id":"c","output":"[1]"}]}`,
		"array with spaces": `{"input": [ {"role":"user","content":"a"} ,  {"role":"user","content":"]"} ] }`,
		"continuation":      `{"previous_response_id":"resp_1","input":[{"role":"user","content":"b"}]}`,
		"empty array":       `{"input":[ ]}`,
		"string":            `{"previous_response_id":"resp_2","input":"just text"}`,
		"no input":          `{"model":"m"}`,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := openBody(json.RawMessage(raw))
			if err != nil {
				t.Fatal(err)
			}
			rec, err := b.keptItems(out)
			if err != nil {
				t.Fatal(err)
			}
			var got []any
			if err := json.Unmarshal(rec, &got); err != nil {
				t.Fatalf("record %s is no JSON array: %v", rec, err)
			}
			input, err := b.inputItems()
			if err != nil {
				t.Fatal(err)
			}
			var items []json.RawMessage
			if prev := b.previousResponseID(); prev != "" {
				l, _ := json.Marshal(link{Type: linkType, ID: prev})
				items = append(items, l)
			}
			items = append(append(items, input...), out...)
			want, _ := encodeItems(items)
			var wantV []any
			if err := json.Unmarshal(want, &wantV); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, wantV) {
				t.Fatalf("record\n%s\nwant\n%s", rec, want)
			}
		})
	}
}
