package sandbox_test

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts/oresponse"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestBodiesRoundTripTyped: what the sandbox answers (a text answer, a
// tool call, an input error) decodes to the typed document Aptix answers
// from, which gives the body back byte for byte.
func TestBodiesRoundTripTyped(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	for name, body := range map[string]string{
		"text":  `{"model":"m","input":"Explain retries."}`,
		"tools": `{"model":"m","input":"call the tool","tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}}}],"tool_choice":"required"}`,
		"error": `{"model":"m","input":"x","max_output_tokens":"many"}`,
	} {
		_, got, err := post(t, ts.URL, body, "")
		if err != nil {
			t.Fatal(err)
		}
		doc, err := oresponse.Parse(got)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, got)
		}
		if string(doc.Bytes()) != string(got) {
			t.Fatalf("%s: not byte for byte", name)
		}
		switch name {
		case "text":
			if doc.Status != "completed" || doc.OutputText() == "" || doc.Usage == nil || doc.FinishReason() != oresponse.FinishStop {
				t.Fatalf("text: %+v", doc)
			}
		case "tools":
			if doc.FinishReason() != oresponse.FinishToolUse || doc.Output[len(doc.Output)-1].Name != "lookup" {
				t.Fatalf("tools: %s", got)
			}
		case "error":
			if doc.Error == nil || doc.Error.Type != "invalid_request_error" || doc.Error.Param != nil || doc.Error.CodeString() != "" {
				t.Fatalf("error: %s", got)
			}
		}
	}
}
