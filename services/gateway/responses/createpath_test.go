package responses

import (
	"encoding/json"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// benchBody is the benchmark's request (cmd/aptix/internal/bench, post) as
// openai-go sends it: instructions, a string input, one strict function tool
// and the aptix extension.
const benchBody = `{"input":"Explain how the HTTP client reuses connections and where timeouts are enforced.","instructions":"You are a senior Go reviewer. Answer precisely and cite chunk ids.","model":"sandbox-1","tools":[{"name":"ddr_document","parameters":{"additionalProperties":false,"properties":{"body":{"type":"string"},"title":{"type":"string"}},"required":["title","body"],"type":"object"},"strict":true,"type":"function","description":"Write a design decision record"}],"aptix":{"mode":"ANALYZE","workspaceId":"go"}}`

// BenchmarkCreatePath is the gateway's own CPU for one synchronous create,
// without the bus: parse the body, translate it to the turn, make the
// response record and encode it, then build the response from a completed
// turn and encode it.
func BenchmarkCreatePath(b *testing.B) {
	done := contracts.Turn{ConversationId: "c1", TurnId: "t1",
		LLM: &contracts.LLMResult{Backend: "sandbox", Model: "sandbox-1", Status: 200,
			Body: `{"id":"resp_up","object":"response","status":"completed","model":"sandbox-1","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Connections are reused by the Transport's idle pool [c1][c2]; timeouts are enforced by the client's Timeout and the dialer [c3].","annotations":[]}]}],"usage":{"input_tokens":900,"output_tokens":40,"total_tokens":940}}`},
		Response: &contracts.AgentExecuteResponse{Kind: "ok", ConversationId: "c1", TurnId: "t1", ResponseContinuationId: "resp_up"}}
	b.ReportAllocs()
	for b.Loop() {
		r, e := Parse([]byte(benchBody))
		if e != nil {
			b.Fatal(e)
		}
		exec, e := ToExecute(r, Target{ConversationID: "c-t1", TurnID: "t1", Backend: "sandbox", Model: "sandbox-1"})
		if e != nil {
			b.Fatal(e)
		}
		if _, err := json.Marshal(exec); err != nil {
			b.Fatal(err)
		}
		m, e := MetaFor(r)
		if e != nil {
			b.Fatal(e)
		}
		m.ID, m.ConversationID, m.TurnID = "resp_1", "c-t1", "t1"
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(FromTurn(m, &done, 1)); err != nil {
			b.Fatal(err)
		}
	}
}
