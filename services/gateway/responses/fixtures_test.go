package responses

import (
	"encoding/json"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// mappedParts are the pieces the completed-event fixtures of
// TestFromMappedTurn and TestDecodeMatchesEncodingJSON are built from.
type mappedParts struct {
	sources                                   []contracts.SourceRef
	usage15                                   contracts.LlmUsage
	badParam, incomplete, verbatim, rewritten string
	loop                                      *contracts.ToolLoop
}

func newMappedParts() mappedParts {
	sources := []contracts.SourceRef{{Id: "ck_1", Path: "retry.go", StartLine: 3, EndLine: 9, Score: 0.5}}
	usage15 := contracts.LlmUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	return mappedParts{
		sources: sources, usage15: usage15,
		badParam:   `{"error":{"message":"Invalid 'temperature': must be at most 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
		incomplete: `{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		verbatim:   `{"id":"resp_e","status":"completed","model":"local-1","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"<tool_call>{\"name\":\"lookup\",\"arguments\":{}}</tool_call>"}]}],"usage":{"input_tokens":4,"output_tokens":2,"total_tokens":6}}`,
		rewritten:  `{"id":"resp_e","status":"completed","model":"local-1","output":[{"id":"fc_e1","type":"function_call","status":"completed","call_id":"call_e1","name":"lookup","arguments":"{}"}],"usage":{"input_tokens":4,"output_tokens":2,"total_tokens":6}}`,
		loop: &contracts.ToolLoop{MaxDepth: 4, Round: 1, Status: contracts.LoopCompleted, Usage: usage15,
			Items:      []json.RawMessage{json.RawMessage(`{"type":"mcp_list_tools","id":"mcpl_1"}`), json.RawMessage(`{"type":"mcp_call","id":"mcp_1"}`)},
			Executions: []contracts.ToolExecution{{ID: "mcp_1", Tool: "search", Server: "aptix", CallID: "call_s", Round: 1, Status: "completed"}}},
	}
}

// ok is a successful mapper result of body.
func (p mappedParts) ok(body string, u contracts.LlmUsage) *contracts.AgentExecuteResponse {
	return &contracts.AgentExecuteResponse{Kind: contracts.KindOK, Usage: u, Sources: p.sources, RawResponseJson: body, ToolCalls: []contracts.AgentToolCall{}}
}

// env is the envelope section of a fixture turn.
func (p mappedParts) env() *contracts.Envelope {
	return &contracts.Envelope{Backend: "b", Model: "m", Sources: p.sources}
}
