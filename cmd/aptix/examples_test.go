package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// run executes the CLI in-process and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestExamples runs the README's render and map examples on the bundled files.
func TestExamples(t *testing.T) {
	out, err := run(t, "render", "--request", "../../examples/ddr-turn1.request.json", "--chunks", "../../examples/chunks.json")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal([]byte(out), &body); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	if len(body.Input) != 2 || body.Input[0].Role != "system" || len(body.Input[1].Content) != 2 ||
		!strings.HasPrefix(body.Input[1].Content[1].Text, "[CONTEXT]\n\n=== CHUNK 1 ===\nId: ctx_1\n") {
		t.Fatalf("unexpected body:\n%s", out)
	}
	var choice bytes.Buffer
	_ = json.Compact(&choice, body.ToolChoice)
	if choice.String() != `{"type":"function","name":"ddr_document"}` {
		t.Fatalf("tool_choice %s", body.ToolChoice)
	}

	out, err = run(t, "render", "--request", "../../examples/ddr-turn2.request.json", "--chunks", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"previous_response_id": "resp_abc123"`) || strings.Contains(out, `"system"`) {
		t.Fatalf("turn 2 must continue and carry no system message:\n%s", out)
	}

	// The README's continuation example: the conversation's recorded tools are re-sent.
	out, err = run(t, "render", "--request", "../../examples/ddr-turn2.request.json", "--chunks", "", "--prior-tools", "../../examples/ddr-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"previous_response_id": "resp_abc123"`) || !strings.Contains(out, `"name": "ddr_document"`) {
		t.Fatalf("continuation with --prior-tools must re-send the tools:\n%s", out)
	}
	// Flag values outlive a run: clear --prior-tools for later renders.
	if _, err := run(t, "render", "--request", "../../examples/ddr-turn2.request.json", "--prior-tools", ""); err != nil {
		t.Fatal(err)
	}

	out, err = run(t, "map", "--response", "../../examples/tool-only.response.json", "--request", "../../examples/ddr-turn1.request.json", "--status", "200")
	if err != nil {
		t.Fatal(err)
	}
	var resp contracts.AgentExecuteResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Kind != contracts.KindToolOnly || resp.ToolCalls[0].Name != "ddr_document" || resp.ResponseContinuationId != "resp_abc123" || resp.TurnId != "turn-1" {
		t.Fatalf("%+v", resp)
	}

	out, err = run(t, "map", "--response", "../../examples/rate-limited.response.json", "--status", "429", "--request", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Kind != contracts.KindError || resp.ErrorCode != "rate_limit_exceeded" {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestRenderRejectsBadInput(t *testing.T) {
	for name, args := range map[string][]string{
		"missing file":   {"render", "--request", "nope.json"},
		"invalid tools":  {"render", "--request", "testdata/bad-tools.request.json"},
		"unknown choice": {"render", "--request", "testdata/unknown-choice.request.json"},
	} {
		_, err := run(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: want a usage error (exit 2), got %v", name, err)
		}
	}
}

// TestRenderPromptProfile: for a profile with toolMode prompt, render shows
// the tool-call instructions (docs/tool-emulation.md) in the body's instructions instead of the function
// tools, and --instructions prints it as plain text.
func TestRenderPromptProfile(t *testing.T) {
	profilesFile := filepath.Join(t.TempDir(), "profiles.json")
	err := os.WriteFile(profilesFile, []byte(`{"profiles":{"local":{"baseUrl":"http://127.0.0.1:8080/v1","capabilities":{"toolMode":"prompt"}}}}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("APTIX_PROFILES", profilesFile)
	render, _, _ := root.Find([]string{"render"})
	t.Cleanup(func() { // flags outlive one Execute: leave them as the other tests expect
		_ = render.Flags().Set("profile", "")
		_ = render.Flags().Set("instructions", "false")
	})

	out, err := run(t, "render", "--request", "../../examples/ddr-turn1.request.json", "--chunks", "../../examples/chunks.json", "--profile", "local")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(out), &body); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	instructions, _ := body["instructions"].(string)
	for _, want := range []string{
		"Tool calling instructions:\nOnly emit tool calls using <tool_call>...</tool_call>.\n",
		"\nIf no tool is needed, respond with plain text.\nTool choice is forced: you MUST call \"ddr_document\".\nAvailable tools (schema):\n",
		"\n- ddr_document: {\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"body\":{\"type\":\"string\"}},\"required\":[\"title\",\"body\"]}\n",
		"\nTool: ddr_document\nDescription: Write a DDR\nParameters:\n- title (required, string)\n- body (required, string)\nExample tool_call:\n" +
			`<tool_call>{"name":"ddr_document","arguments":"{\"title\":\"example\",\"body\":\"example\"}"}</tool_call>`,
	} {
		if !strings.Contains(instructions, want) {
			t.Fatalf("instructions lack %q:\n%s", want, instructions)
		}
	}
	if _, ok := body["tools"]; ok {
		t.Fatalf("the function tool must not be sent: %v", body["tools"])
	}
	if _, ok := body["tool_choice"]; ok {
		t.Fatalf("the forced choice is in the instructions, not on the wire: %v", body["tool_choice"])
	}

	text, err := run(t, "render", "--request", "../../examples/ddr-turn1.request.json", "--chunks", "../../examples/chunks.json", "--profile", "local", "--instructions")
	if err != nil {
		t.Fatal(err)
	}
	if text != instructions+"\n" {
		t.Fatalf("--instructions printed\n%s\nwant\n%s", text, instructions)
	}
}

// TestExampleProfilesLoad: the README points at examples/profiles.json.
func TestExampleProfilesLoad(t *testing.T) {
	set, err := profiles.Load("../../examples/profiles.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("local-prompt")
	if err != nil || p.Capabilities.ToolMode != profiles.ToolModePrompt || p.Capabilities.SupportsPreviousResponseID {
		t.Fatalf("local-prompt: %+v, %v", p, err)
	}
	if def, _ := set.Get(""); def.Name != "sandbox" {
		t.Fatalf("default profile %q", def.Name)
	}
}

// TestRenderChatProfile: for a chat-completions profile (examples/backends.json)
// render prints the translated /chat/completions body: the boot prompt as a
// system message, the user message with the [CONTEXT] block as its own
// part, tools nested the Chat Completions way, the profile's token field.
func TestRenderChatProfile(t *testing.T) {
	t.Setenv("APTIX_PROFILES", "../../examples/backends.json")
	render, _, _ := root.Find([]string{"render"})
	t.Cleanup(func() { _ = render.Flags().Set("profile", "") })
	out, err := run(t, "render", "--request", "../../examples/ddr-turn1.request.json", "--chunks", "../../examples/chunks.json", "--profile", "vllm")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		TopK  int             `json:"top_k"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal([]byte(out), &body); err != nil {
		t.Fatalf("render output is not JSON: %v\n%s", err, out)
	}
	n := len(body.Messages)
	if n < 2 || body.Messages[0].Role != "system" || body.Messages[n-1].Role != "user" || len(body.Tools) == 0 ||
		body.Tools[0].Type != "function" || body.Tools[0].Function.Name == "" || body.TopK != 20 || body.Input != nil {
		t.Fatalf("chat body:\n%s", out)
	}
	var parts []struct{ Type, Text string }
	if err := json.Unmarshal(body.Messages[n-1].Content, &parts); err != nil || len(parts) != 2 || !strings.HasPrefix(parts[1].Text, "[CONTEXT]\n") {
		t.Fatalf("the context block is not its own part:\n%s", body.Messages[n-1].Content)
	}
}
