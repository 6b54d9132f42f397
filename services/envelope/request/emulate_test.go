package request

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// The seed's example tools, one in each shape, plus a tool that is not a
// function.
const emulatedTools = `[{"type":"function","function":{"name":"getFileTree","parameters":{"type":"object","properties":{}}}},` +
	`{"type":"function","name":"writeToFile","parameters":{"type":"object","properties":{"path":{"type":"string","example":"example.md"},"content":{"type":"string"}},"required":["path","content"]}},` +
	`{"type":"web_search"}]`

var promptMode = profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModePrompt}

func notesTurn(choice string) contracts.AgentExecuteRequest {
	return contracts.AgentExecuteRequest{ConversationId: "c", TurnId: "t1", Instruction: "Create a new note named [[Example]].",
		ToolsJson: emulatedTools, ToolChoiceName: choice}
}

// TestPromptModeBody: function tools leave "tools", the seed's injection is
// the body's instructions (ahead of the boot prompt, which stays the system
// message), and the LLM caller gets the function tools back in Emulation.
func TestPromptModeBody(t *testing.T) {
	res, body := build(t, Input{Request: notesTurn(""), Conversation: ddrConversation, Capabilities: promptMode})

	instructions, _ := body["instructions"].(string)
	wantTail := "Tool: writeToFile\nParameters:\n- path (required, string)\n- content (required, string)\nExample tool_call:\n" +
		`<tool_call>{"name":"writeToFile","arguments":"{\"path\":\"example.md\",\"content\":\"example\"}"}</tool_call>`
	if !strings.HasPrefix(instructions, "Tool calling instructions:\nOnly emit tool calls using <tool_call>...</tool_call>.\n") ||
		!strings.Contains(instructions, "\nIf no tool is needed, respond with plain text.\nAvailable tools (schema):\n- getFileTree: {\"type\":\"object\",\"properties\":{}}\n") ||
		!strings.HasSuffix(instructions, wantTail) {
		t.Fatalf("instructions:\n%s", instructions)
	}
	tools, _ := json.Marshal(body["tools"])
	if string(tools) != `[{"type":"web_search"}]` {
		t.Fatalf("only the non-function tool may be sent, got %s", tools)
	}
	if _, ok := body["tool_choice"]; ok {
		t.Fatalf("tool_choice omitted by the client must stay omitted: %v", body["tool_choice"])
	}
	input := body["input"].([]any)
	if input[0].(map[string]any)["role"] != "system" {
		t.Fatalf("the boot prompt stays the first input item: %v", input[0])
	}
	if res.Emulation == nil || len(res.Emulation.Tools) != 2 || res.Emulation.Tools[0].Name != "getFileTree" || res.Emulation.Tools[1].Name != "writeToFile" || res.Emulation.ToolChoice != nil {
		t.Fatalf("emulation %+v", res.Emulation)
	}
	if len(res.Tools) != 3 {
		t.Fatalf("the conversation's tool set is all three tools, got %d", len(res.Tools))
	}
}

// TestPromptModeToolChoice: the choice line goes into the injection;
// required and forced leave the body, auto and none stay only while a
// non-function tool remains for them to govern.
func TestPromptModeToolChoice(t *testing.T) {
	onlyFunctions := `[{"type":"function","name":"getFileTree","parameters":{"type":"object","properties":{}}}]`
	for _, tc := range []struct {
		name, tools, choice string
		line                string // the injection's tool-choice line, "" for none
		wire                string // tool_choice on the wire, "" for absent
		emulated            string // Emulation.ToolChoice
	}{
		{"auto with other tools", emulatedTools, "auto", "", `"auto"`, `"auto"`},
		{"auto, functions only", onlyFunctions, "auto", "", "", `"auto"`},
		{"none with other tools", emulatedTools, "none", "Tool choice is none: never emit <tool_call>.", `"none"`, `"none"`},
		{"none, functions only", onlyFunctions, "none", "Tool choice is none: never emit <tool_call>.", "", `"none"`},
		{"required", emulatedTools, "required", "Tool choice is required: you MUST emit at least one <tool_call>.", "", `"required"`},
		{"forced", emulatedTools, "writeToFile", `Tool choice is forced: you MUST call "writeToFile".`, "", `{"type":"function","name":"writeToFile"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := notesTurn(tc.choice)
			req.ToolsJson = tc.tools
			res, body := build(t, Input{Request: req, Capabilities: promptMode})
			instructions := body["instructions"].(string)
			before, _, _ := strings.Cut(instructions, "\nAvailable tools (schema):")
			lastLine := before[strings.LastIndex(before, "\n")+1:]
			if tc.line == "" && lastLine != "If no tool is needed, respond with plain text." || tc.line != "" && lastLine != tc.line {
				t.Fatalf("line before the manifest %q, want %q", lastLine, tc.line)
			}
			wire := ""
			if v, ok := body["tool_choice"]; ok {
				b, _ := json.Marshal(v)
				wire = string(b)
			}
			if wire != tc.wire || string(res.Emulation.ToolChoice) != tc.emulated {
				t.Fatalf("tool_choice on the wire %s, for the parser %s", wire, res.Emulation.ToolChoice)
			}
		})
	}
}

// TestPromptModeWithoutFunctionTools: no function tools, no injection; the
// body is what a native backend gets.
func TestPromptModeWithoutFunctionTools(t *testing.T) {
	req := ddrTurn1()
	req.ToolsJson, req.ToolChoiceName = `[{"type":"web_search"}]`, "required"
	native, err := Build(Input{Request: req, Conversation: ddrConversation})
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := Build(Input{Request: req, Conversation: ddrConversation, Capabilities: promptMode})
	if err != nil {
		t.Fatal(err)
	}
	if string(prompt.Body) != string(native.Body) || prompt.Emulation != nil || strings.Contains(string(prompt.Body), "instructions") {
		t.Fatalf("prompt mode without function tools\n got %s\nwant %s", prompt.Body, native.Body)
	}
}

// TestPromptModeContinuation: instructions do not travel with
// previous_response_id, so the injection is re-sent on every turn, even
// where the backend retains the (non-function) tools.
func TestPromptModeContinuation(t *testing.T) {
	first, _ := build(t, Input{Request: notesTurn(""), Capabilities: promptMode})
	req := notesTurn("")
	req.TurnId, req.ResponseContinuationId = "t2", "resp_1"
	caps := promptMode
	caps.RetainsTools = true
	res, body := build(t, Input{Request: req, Capabilities: caps, PriorTools: first.Tools})
	if res.ToolsSent || body["tools"] != nil {
		t.Fatalf("retained tools must be omitted: %v", body["tools"])
	}
	if !strings.HasPrefix(body["instructions"].(string), "Tool calling instructions:\n") || res.Emulation == nil {
		t.Fatalf("the injection must be re-sent on a continuation: %v", body["instructions"])
	}
}

func TestPromptModeRejectsBadStrictSchema(t *testing.T) {
	req := notesTurn("")
	req.ToolsJson = `[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"x":{"type":"nonsense"}}}}]`
	_, err := Build(Input{Request: req, Capabilities: promptMode})
	var te *tooldef.InvalidError
	if !errors.As(err, &te) || te.Code() != tooldef.CodeInvalidTools {
		t.Fatalf("want an invalid_tools error, got %v", err)
	}
	// A native backend would reject it itself; Aptix does not pre-validate there.
	if _, err := Build(Input{Request: req}); err != nil {
		t.Fatalf("native mode: %v", err)
	}
}
