package contracts

import "testing"

// TestTurnResult: the typed result is the body the answer was read from,
// in a version 1 completion (llm.body) and a version 2 one
// (rawResponseJson) alike, decoded once per turn value however many
// readers ask, and anew when the body changes.
func TestTurnResult(t *testing.T) {
	body := `{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}`
	v1 := Turn{Version: 1, LLM: &LLMResult{Status: 200, Body: body}, Response: &AgentExecuteResponse{RawResponseJson: body}}
	v2 := Turn{Version: 2, LLM: &LLMResult{Status: 200}, Response: &AgentExecuteResponse{RawResponseJson: body}}
	for name, turn := range map[string]*Turn{"v1": &v1, "v2": &v2} {
		doc, err := turn.Result()
		if err != nil || doc == nil || doc.OutputText() != "hi" || string(doc.Bytes()) != body {
			t.Fatalf("%s: %+v, %v", name, doc, err)
		}
		if again, _ := turn.Result(); again != doc {
			t.Fatalf("%s: decoded twice", name)
		}
		copied := *turn // a stage's copy shares the decode
		if c, _ := copied.Result(); c != doc {
			t.Fatalf("%s: a copy decoded again", name)
		}
	}
	v2.Response.RawResponseJson = `{"id":"resp_2"}`
	if doc, _ := v2.Result(); doc == nil || doc.ID != "resp_2" {
		t.Fatalf("a changed body kept the old document: %+v", doc)
	}
	bad := Turn{LLM: &LLMResult{Status: 200, Body: "<html>"}}
	if doc, err := bad.Result(); err == nil || doc != nil {
		t.Fatal("a body that is no JSON object decoded")
	}
	if doc, err := (&Turn{}).Result(); doc != nil || err != nil {
		t.Fatal("a turn without a body has a result")
	}
}
