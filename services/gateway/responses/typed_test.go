package responses

import (
	"encoding/json"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestAnswersFromTypedResult: a completed turn's response comes from the
// turn's typed result, decoded once: FromTurn, Failure and the other
// front doors' view of the items (Items) read the document Result
// decoded, its output items are the body's own bytes, and an item the
// gateway added (the file_search_call) is typed too.
func TestAnswersFromTypedResult(t *testing.T) {
	p := newMappedParts()
	turn := carried(contracts.Turn{Envelope: p.env(), LLM: &contracts.LLMResult{Status: 200, Body: upstreamOK}, Response: p.ok(upstreamOK, p.usage15)})
	doc, err := turn.Result()
	if err != nil || doc == nil {
		t.Fatalf("typed result: %v", err)
	}
	r := FromTurn(Meta{ID: "resp_x", FileSearch: true}, &turn, 1)
	if again, _ := turn.Result(); again != doc {
		t.Fatal("the turn's typed result was decoded again")
	}
	if Failure(&turn) != nil {
		t.Fatal("a completed turn failed")
	}
	items := r.Items()
	if len(items) != len(doc.Output)+1 || items[0].Type != "file_search_call" {
		t.Fatalf("items: %+v", items)
	}
	for i, it := range doc.Output {
		got := items[i+1]
		if !sameBytes(got.Raw, it.Raw) || !sameBytes(r.Output[i+1], it.Raw) {
			t.Fatalf("item %d is not the typed result's (bytes copied or decoded again)", i)
		}
		var v any
		if json.Unmarshal(r.Output[i+1], &v) != nil {
			t.Fatalf("item %d is not JSON", i)
		}
	}
	if r.OutputText() != doc.OutputText() {
		t.Fatalf("output text %q, typed result's %q", r.OutputText(), doc.OutputText())
	}
}
