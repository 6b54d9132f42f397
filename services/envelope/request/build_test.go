package request

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

const ddrToolChat = `[{"type":"function","function":{"name":"ddr_document","description":"Write a DDR","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}]`

var ddrConversation = contracts.ConversationContext{Id: "ddr", SystemPrompt: "You are the Aptix Reasoner.", DefaultModel: "gpt-5.1"}

func ddrTurn1() contracts.AgentExecuteRequest {
	return contracts.AgentExecuteRequest{ConversationId: "conv-1", TurnId: "t1", Mode: "DDR_CREATION",
		Instruction: "Create a DDR for invoice e-mails.", ToolsJson: ddrToolChat, ToolChoiceName: "ddr_document"}
}

// decoded is the body as a client-agnostic map, so tests read the wire format.
func build(t *testing.T, in Input) (Result, map[string]any) {
	t.Helper()
	res, err := Build(in)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(res.Body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, res.Body)
	}
	return res, m
}

// TestDDRConversationGolden pins AGN-003's two-turn DDR example (§4.1, §4.2)
// on the real wire format: input_text parts, type "message", the function
// form of tool_choice, strict explicit, tools re-sent on continuation.
func TestDDRConversationGolden(t *testing.T) {
	block := contextblock.Format([]contracts.RagChunk{{Id: "ctx_1", Path: "Billing/Managers/InvoiceManager.cs", StartLine: 40, EndLine: 85, Language: "C#", Content: "public class InvoiceManager {}"}}, contextblock.Options{}).Text

	res, err := Build(Input{Request: ddrTurn1(), Conversation: ddrConversation, ContextBlock: block})
	if err != nil {
		t.Fatal(err)
	}
	want1 := `{"model":"gpt-5.1","input":[` +
		`{"type":"message","role":"system","content":[{"type":"input_text","text":"You are the Aptix Reasoner."}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: DDR_CREATION]\n\n[INSTRUCTION]\nCreate a DDR for invoice e-mails."},` +
		`{"type":"input_text","text":"[CONTEXT]\n\n=== CHUNK 1 ===\nId: ctx_1\nPath: Billing/Managers/InvoiceManager.cs\nLines: 40-85\nLanguage: csharp\n` + "```csharp\\npublic class InvoiceManager {}\\n```" + `"}]}],` +
		`"tools":[{"type":"function","name":"ddr_document","description":"Write a DDR","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]},"strict":false}],` +
		`"tool_choice":{"type":"function","name":"ddr_document"}}`
	if string(res.Body) != want1 {
		t.Fatalf("turn 1 body\n got %s\nwant %s", res.Body, want1)
	}

	turn2 := contracts.AgentExecuteRequest{ConversationId: "conv-1", TurnId: "t2", ResponseContinuationId: "resp_abc123",
		Mode: "DDR_REFINEMENT", Instruction: "Add Risks.", ToolsJson: ddrToolChat, ToolChoiceName: "ddr_document"}
	res2, err := Build(Input{Request: turn2, Conversation: ddrConversation, PriorTools: res.Tools})
	if err != nil {
		t.Fatal(err)
	}
	want2 := `{"model":"gpt-5.1","previous_response_id":"resp_abc123","input":[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: DDR_REFINEMENT]\n\n[INSTRUCTION]\nAdd Risks."}]}],` +
		`"tools":[{"type":"function","name":"ddr_document","description":"Write a DDR","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]},"strict":false}],` +
		`"tool_choice":{"type":"function","name":"ddr_document"}}`
	if string(res2.Body) != want2 {
		t.Fatalf("turn 2 body\n got %s\nwant %s", res2.Body, want2)
	}
}

func TestSystemMessageFirstTurnOnly(t *testing.T) {
	for _, tt := range []struct {
		name         string
		continuation string
		prompt       string
		wantSystem   bool
	}{
		{"first turn", "", "boot", true},
		{"continuation", "resp_1", "boot", false},
		{"first turn without a boot prompt", "", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := ddrTurn1()
			req.ResponseContinuationId = tt.continuation
			_, m := build(t, Input{Request: req, Conversation: contracts.ConversationContext{SystemPrompt: tt.prompt}})
			input := m["input"].([]any)
			first := input[0].(map[string]any)
			if got := first["role"] == "system"; got != tt.wantSystem {
				t.Fatalf("system message present = %v, want %v", got, tt.wantSystem)
			}
			last := input[len(input)-1].(map[string]any)
			if last["role"] != "user" || last["type"] != "message" {
				t.Fatalf("last item %v, want the user message", last)
			}
			_, hasPrev := m["previous_response_id"]
			if hasPrev != (tt.continuation != "") || (hasPrev && m["previous_response_id"] != tt.continuation) {
				t.Fatalf("previous_response_id = %v, want %q", m["previous_response_id"], tt.continuation)
			}
		})
	}
}

func userParts(t *testing.T, m map[string]any) []string {
	t.Helper()
	input := m["input"].([]any)
	var texts []string
	for _, p := range input[len(input)-1].(map[string]any)["content"].([]any) {
		part := p.(map[string]any)
		if part["type"] != "input_text" {
			t.Fatalf("part type %v, want input_text", part["type"])
		}
		texts = append(texts, part["text"].(string))
	}
	return texts
}

func TestModeInstructionAndContextParts(t *testing.T) {
	for _, tt := range []struct {
		name, mode, convMode, block string
		want                        []string
	}{
		{"mode and context", "DDR_CREATION", "", "[CONTEXT]\n\n=== CHUNK 1 ===", []string{"[MODE: DDR_CREATION]\n\n[INSTRUCTION]\ndo it", "[CONTEXT]\n\n=== CHUNK 1 ==="}},
		{"no context block: one part", "DDR_REVIEW", "", "", []string{"[MODE: DDR_REVIEW]\n\n[INSTRUCTION]\ndo it"}},
		{"mode from the conversation context", "", "PLANNING", "", []string{"[MODE: PLANNING]\n\n[INSTRUCTION]\ndo it"}},
		{"no mode anywhere", "", "", "", []string{"[MODE: DEFAULT]\n\n[INSTRUCTION]\ndo it"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := contracts.AgentExecuteRequest{Mode: tt.mode, Instruction: "do it"}
			_, m := build(t, Input{Request: req, Conversation: contracts.ConversationContext{Mode: tt.convMode}, ContextBlock: tt.block})
			got := userParts(t, m)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("parts %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModelFallback(t *testing.T) {
	for _, tt := range []struct {
		name  string
		agent *contracts.AgentContext
		conv  string
		def   string
		want  string
	}{
		{"agent context wins", &contracts.AgentContext{Model: "gpt-4.1"}, "gpt-5.1", "x", "gpt-4.1"},
		{"conversation default", nil, "gpt-5.1", "x", "gpt-5.1"},
		{"backend default", nil, "", "llama3", "llama3"},
		{"global default", nil, "", "", profiles.DefaultModel},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := build(t, Input{Request: contracts.AgentExecuteRequest{AgentContext: tt.agent, Instruction: "x"},
				Conversation: contracts.ConversationContext{DefaultModel: tt.conv}, DefaultModel: tt.def})
			if res.Model != tt.want {
				t.Fatalf("model %q, want %q", res.Model, tt.want)
			}
		})
	}
}

func TestToolsAndToolChoice(t *testing.T) {
	const respShape = `[{"type":"function","name":"ddr_review","parameters":{"type":"object"},"strict":true},{"type":"web_search"}]`
	const defaults = `[{"type":"function","function":{"name":"ddr_review","description":"default def"}},{"type":"function","name":"ddr_search_result"}]`
	tests := []struct {
		name       string
		toolsJSON  string
		defaults   string
		choice     string
		wantTools  string
		wantChoice string
	}{
		{"chat completions shape normalized", ddrToolChat, "", "",
			`[{"type":"function","name":"ddr_document","description":"Write a DDR","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]},"strict":false}]`, ``},
		{"responses shape, strict kept, other tools pass through", respShape, "", "ddr_review",
			`[{"type":"function","name":"ddr_review","parameters":{"type":"object"},"strict":true},{"type":"web_search"}]`, `{"type":"function","name":"ddr_review"}`},
		{"merged with defaults, request wins on a clash", respShape, defaults, "ddr_search_result",
			`[{"type":"function","name":"ddr_review","parameters":{"type":"object"},"strict":true},{"type":"web_search"},{"type":"function","name":"ddr_search_result","parameters":{"type":"object","properties":{}},"strict":false}]`,
			`{"type":"function","name":"ddr_search_result"}`},
		{"defaults alone", "", defaults, "",
			`[{"type":"function","name":"ddr_review","description":"default def","parameters":{"type":"object","properties":{}},"strict":false},{"type":"function","name":"ddr_search_result","parameters":{"type":"object","properties":{}},"strict":false}]`, ``},
		{"auto", ddrToolChat, "", "auto", "", `"auto"`},
		{"none", ddrToolChat, "", "none", "", `"none"`},
		{"required", ddrToolChat, "", "required", "", `"required"`},
		{"no tools, no choice", "", "", "", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: tt.toolsJSON, ToolChoiceName: tt.choice}
			res, err := Build(Input{Request: req, Conversation: contracts.ConversationContext{DefaultTools: json.RawMessage(tt.defaults)}})
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Tools      json.RawMessage `json:"tools"`
				ToolChoice json.RawMessage `json:"tool_choice"`
			}
			if err := json.Unmarshal(res.Body, &body); err != nil {
				t.Fatal(err)
			}
			if tt.wantTools != "" && string(body.Tools) != tt.wantTools {
				t.Errorf("tools\n got %s\nwant %s", body.Tools, tt.wantTools)
			}
			if tt.toolsJSON == "" && tt.defaults == "" && body.Tools != nil {
				t.Errorf("tools present without any: %s", body.Tools)
			}
			if string(body.ToolChoice) != tt.wantChoice {
				t.Errorf("tool_choice %s, want %s", body.ToolChoice, tt.wantChoice)
			}
		})
	}
}

func TestContinuationTools(t *testing.T) {
	prior, err := tooldef.Parse("toolsJson", ddrToolChat)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(ddrToolChat, "Write a DDR", "Write a better DDR", 1)
	tests := []struct {
		name      string
		retains   bool
		toolsJSON string
		wantSent  bool
	}{
		{"OpenAI (tools not retained): re-sent", false, ddrToolChat, true},
		{"retaining backend, unchanged: omitted", true, ddrToolChat, false},
		{"retaining backend, changed: re-sent", true, changed, true},
		{"client sent tools on turn 1 only: the conversation keeps them", false, "", true},
		{"retaining backend, tools only from the record: omitted", true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := contracts.AgentExecuteRequest{Instruction: "x", ResponseContinuationId: "resp_1", ToolsJson: tt.toolsJSON, ToolChoiceName: "ddr_document"}
			res, m := build(t, Input{Request: req, PriorTools: prior, Capabilities: profiles.Capabilities{RetainsTools: tt.retains}})
			_, has := m["tools"]
			if has != tt.wantSent || res.ToolsSent != tt.wantSent {
				t.Fatalf("tools in body %v, ToolsSent %v, want %v", has, res.ToolsSent, tt.wantSent)
			}
			if len(res.Tools) != 1 {
				t.Fatalf("the conversation's tool set must be reported either way, got %d", len(res.Tools))
			}
			if m["tool_choice"] == nil {
				t.Fatal("tool_choice must be sent on every turn that names one")
			}
		})
	}
}

func TestTypedErrors(t *testing.T) {
	tests := []struct {
		name     string
		req      contracts.AgentExecuteRequest
		defaults string
		code     string
		mention  string
	}{
		{"not JSON", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: "{nope"}, "", tooldef.CodeInvalidTools, "toolsJson"},
		{"an object, not an array", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `{"type":"function"}`}, "", tooldef.CodeInvalidTools, "array"},
		{"tool without type", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `[{"name":"a"}]`}, "", tooldef.CodeInvalidTools, "toolsJson[0]"},
		{"bad function name", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `[{"type":"function","name":"has space"}]`}, "", tooldef.CodeInvalidTools, "has space"},
		{"parameters not an object", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `[{"type":"function","name":"a","parameters":[1]}]`}, "", tooldef.CodeInvalidTools, "JSON Schema"},
		{"duplicate name", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `[{"type":"function","name":"a"},{"type":"function","function":{"name":"a"}}]`}, "", tooldef.CodeInvalidTools, "twice"},
		{"bad default tools", contracts.AgentExecuteRequest{Instruction: "x"}, `[1]`, tooldef.CodeInvalidTools, "defaultTools"},
		{"unknown tool choice", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: ddrToolChat, ToolChoiceName: "ddr_review"}, "", tooldef.CodeUnknownToolChoice, "ddr_document"},
		{"tool choice without tools", contracts.AgentExecuteRequest{Instruction: "x", ToolChoiceName: "ddr_review"}, "", tooldef.CodeUnknownToolChoice, "ddr_review"},
		{"tool choice naming a non-function tool", contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: `[{"type":"web_search"}]`, ToolChoiceName: "web_search"}, "", tooldef.CodeUnknownToolChoice, "web_search"},
		{"empty instruction", contracts.AgentExecuteRequest{Instruction: "  "}, "", CodeInvalidRequest, "instruction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(Input{Request: tt.req, Conversation: contracts.ConversationContext{DefaultTools: json.RawMessage(tt.defaults)}})
			var coded interface{ Code() string }
			if !errors.As(err, &coded) || coded.Code() != tt.code {
				t.Fatalf("err %v, want code %s", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("%q does not mention %q", err, tt.mention)
			}
		})
	}
}

// FuzzBuildNeverPanics: arbitrary ToolsJson and tool choice give a body or a typed error.
func FuzzBuildNeverPanics(f *testing.F) {
	f.Add(ddrToolChat, "ddr_document")
	f.Add(`[{"type":"function","function":null}]`, "")
	f.Add(`[{"type":"x"},{"type":"x"}]`, "x")
	f.Fuzz(func(t *testing.T, tools, choice string) {
		res, err := Build(Input{Request: contracts.AgentExecuteRequest{Instruction: "x", ToolsJson: tools, ToolChoiceName: choice}})
		if err != nil {
			var coded interface{ Code() string }
			if !errors.As(err, &coded) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(res.Body) {
			t.Fatalf("invalid body %s", res.Body)
		}
	})
}
