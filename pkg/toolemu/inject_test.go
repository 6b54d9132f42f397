package toolemu

import (
	"strconv"
	"strings"
	"testing"
)

// specBase is the seed's "Base injected text", copied from the
// specification independently of baseInstructions so a typo in either shows.
const specBase = `Tool calling instructions:
Only emit tool calls using <tool_call>...</tool_call>.
Format: <tool_call>{"name":"TOOL_NAME","arguments":"{...}"}</tool_call>
Inside <tool_call>...</tool_call>, output ONLY a JSON object with keys "name" and "arguments".
Always emit <tool_call> blocks exactly as shown; the client executes them.
Do NOT call internal tools directly (shell, apply_patch, web_search, view_image); only emit <tool_call>.
Read-only sandbox or approval restrictions do NOT prevent emitting <tool_call> output.
Use EXACT parameter names from the schema; do NOT invent or rename keys.
Do not add any extra characters before or after the JSON (no trailing ">", no code fences).
Use exactly one opening <tool_call> and one closing </tool_call> tag.
Output must be valid JSON. Do not add extra braces or trailing characters.
Do NOT wrap the JSON object in an array (no leading "[" or trailing "]").
Bad: <tool_call>[{"name":"tool","arguments":"{...}"}]</tool_call>
Never repeat the closing tag.
Example (exact): <tool_call>{"name":"webSearch","arguments":"{\"query\":\"example\",\"chatHistory\":[]}"}</tool_call>
The "arguments" field must be a JSON string.
If a tool has no parameters, use arguments "{}".
If no tool is needed, respond with plain text.`

// The seed's example: getFileTree and writeToFile, tool_choice omitted. The
// seed elides the schemas ({"type":"object",...}) and the parameter
// descriptions (...); these are the schemas filled in. Its example call
// writes path "example.md", which no type fallback yields, so the path
// property carries it as its "example" keyword.
var (
	getFileTree = Tool{Name: "getFileTree", Parameters: []byte(`{"type":"object","properties":{}}`)}
	writeToFile = Tool{Name: "writeToFile", Parameters: []byte(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"Path of the note, relative to the vault","example":"example.md"},` +
		`"content":{"type":"string","description":"Markdown content of the note"}},"required":["path","content"]}`)}
)

func TestInstructionsSpecExample(t *testing.T) {
	got, err := Instructions([]Tool{getFileTree, writeToFile}, Choice{})
	if err != nil {
		t.Fatal(err)
	}
	want := specBase + `
Available tools (schema):
- getFileTree: {"type":"object","properties":{}}
- writeToFile: {"type":"object","properties":{"path":{"type":"string","description":"Path of the note, relative to the vault","example":"example.md"},"content":{"type":"string","description":"Markdown content of the note"}},"required":["path","content"]}
Per-tool guidance and examples (schema-conformant):
Tool: getFileTree
Parameters:
- (no parameters)
Example tool_call:
<tool_call>{"name":"getFileTree","arguments":"{}"}</tool_call>
Tool: writeToFile
Parameters:
- path (required, string): Path of the note, relative to the vault
- content (required, string): Markdown content of the note
Example tool_call:
<tool_call>{"name":"writeToFile","arguments":"{\"path\":\"example.md\",\"content\":\"example\"}"}</tool_call>`
	if got != want {
		t.Fatalf("injection differs from the seed's example\n%s", diff(got, want))
	}
}

// TestInstructionsPerToolTemplate reproduces the seed's per-tool guidance
// template line for line: Description shown, a required and an optional
// parameter, and the example carrying only the required one.
func TestInstructionsPerToolTemplate(t *testing.T) {
	tool := Tool{Name: "tool_name_here", Description: "...", Parameters: []byte(`{"type":"object","properties":{` +
		`"paramA":{"type":"string","description":"description"},"paramB":{"type":"array","items":{"type":"string"},"description":"description"}},"required":["paramA"]}`)}
	got, err := Instructions([]Tool{tool}, Choice{})
	if err != nil {
		t.Fatal(err)
	}
	want := `Per-tool guidance and examples (schema-conformant):
Tool: tool_name_here
Description: ...
Parameters:
- paramA (required, string): description
- paramB (optional, array): description
Example tool_call:
<tool_call>{"name":"tool_name_here","arguments":"{\"paramA\":\"example\"}"}</tool_call>`
	if !strings.HasSuffix(got, "\n"+want) {
		t.Fatalf("per-tool guidance\n%s", diff(got[strings.Index(got, "Per-tool"):], want))
	}
}

// TestInstructionsToolChoice covers the seed's tool choice variants: the
// line sits between the base block and the manifest; auto and an omitted
// choice add none.
func TestInstructionsToolChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		choice Choice
		line   string
	}{
		{"omitted", Choice{}, ""},
		{"auto", Choice{Mode: ChoiceAuto}, ""},
		{"none", Choice{Mode: ChoiceNone}, "Tool choice is none: never emit <tool_call>."},
		{"required", Choice{Mode: ChoiceRequired}, "Tool choice is required: you MUST emit at least one <tool_call>."},
		{"forced", Choice{Mode: ChoiceForced, Name: "writeToFile"}, `Tool choice is forced: you MUST call "writeToFile".`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Instructions([]Tool{getFileTree, writeToFile}, tc.choice)
			if err != nil {
				t.Fatal(err)
			}
			want := specBase + "\n"
			if tc.line != "" {
				want += tc.line + "\n"
			}
			want += "Available tools (schema):\n"
			if !strings.HasPrefix(got, want) {
				t.Fatalf("head of the injection\n%s", diff(got[:min(len(got), len(want)+40)], want))
			}
		})
	}
}

// TestInstructionsStrict: the Strict tools line names the strict tools in
// order, after the tool-choice line and before the manifest.
func TestInstructionsStrict(t *testing.T) {
	a := Tool{Name: "toolA", Strict: true, Parameters: []byte(`{"type":"object","properties":{}}`)}
	b := Tool{Name: "toolB", Strict: true, Parameters: []byte(`{"type":"object","properties":{}}`)}
	got, err := Instructions([]Tool{a, getFileTree, b}, Choice{Mode: ChoiceRequired})
	if err != nil {
		t.Fatal(err)
	}
	want := specBase + "\nTool choice is required: you MUST emit at least one <tool_call>.\n" +
		"Strict tools: toolA, toolB. Arguments MUST conform exactly to schema.\nAvailable tools (schema):\n" +
		`- toolA: {"type":"object","properties":{}}` + "\n" + `- getFileTree: {"type":"object","properties":{}}` + "\n" +
		`- toolB: {"type":"object","properties":{}}` + "\nPer-tool guidance"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("strict line\n%s", diff(got[:min(len(got), len(want)+40)], want))
	}
	if plain, _ := Instructions([]Tool{getFileTree}, Choice{}); strings.Contains(plain, "Strict tools") {
		t.Fatal("a request without strict tools must not get the Strict tools line")
	}
}

func TestInstructionsNoTools(t *testing.T) {
	got, err := Instructions(nil, Choice{Mode: ChoiceRequired})
	if got != "" || err != nil {
		t.Fatalf("no function tools must inject nothing, got %q, %v", got, err)
	}
}

// TestManifestIsJSONStringify: the seed prints JSON.stringify(parameters):
// key order kept, no spaces, numbers in JavaScript form, nothing escaped
// beyond quotes, backslashes and control characters.
func TestManifestIsJSONStringify(t *testing.T) {
	tool := Tool{Name: "q", Parameters: []byte(`{ "type" : "object", "properties": { "z": {"type": "number", "maximum": 1.50, "minimum": -0.0, "multipleOf": 1e-7, "exclusiveMaximum": 1e21},
		"a": {"type": "string", "description": "caf\u00e9 <b> & \"x\"\n\ttab \u0001"} } }`)}
	got, err := Instructions([]Tool{tool}, Choice{})
	if err != nil {
		t.Fatal(err)
	}
	want := `- q: {"type":"object","properties":{"z":{"type":"number","maximum":1.5,"minimum":0,"multipleOf":1e-7,"exclusiveMaximum":1e+21},` +
		`"a":{"type":"string","description":"café <b> & \"x\"\n\ttab \u0001"}}}`
	if !strings.Contains(got, "\n"+want+"\n") {
		t.Fatalf("manifest line\n%s", got[strings.Index(got, "- q:"):strings.Index(got, "Per-tool")])
	}
	// Parameters without a description get no ": description" part; the
	// type of a property without "type" is inferred or "any".
	if !strings.Contains(got, "\n- z (optional, number)\n- a (optional, string): café <b> & \"x\"\n\ttab \x01\n") {
		t.Fatalf("parameter lines:\n%s", got[strings.Index(got, "Parameters:"):])
	}
}

func TestTypeLabel(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"string"}`:                                   "string",
		`{"type":["string","null"]}`:                          "string|null",
		`{"anyOf":[{"type":"integer"},{"type":"null"}]}`:      "integer|null",
		`{"properties":{}}`:                                   "object",
		`{"items":{"type":"string"}}`:                         "array",
		`{"description":"anything goes"}`:                     "any",
		`{"oneOf":[{"type":"string"},{"enum":["a"]}]}`:        "string|any",
		`{"type":"array","items":{"type":"object"},"x":true}`: "array",
	} {
		v, err := parseValue([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if got := typeLabel(v); got != want {
			t.Errorf("typeLabel(%s) = %q, want %q", schema, got, want)
		}
	}
}

func TestInstructionsRejectsBadSchema(t *testing.T) {
	if _, err := Instructions([]Tool{{Name: "x", Parameters: []byte(`{"type":`)}}, Choice{}); err == nil {
		t.Fatal("a schema that is not JSON must be an error")
	}
}

func TestJSNumber(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "1.0": "1", "1.50": "1.5", "100": "100", "1e3": "1000", "-2.5e-3": "-0.0025",
		"0.000001": "0.000001", "1e-7": "1e-7", "1.5e-7": "1.5e-7", "123e18": "123000000000000000000", "1e21": "1e+21",
		"-1.25e+30": "-1.25e+30", "9007199254740993": "9007199254740992",
	} {
		if got := jsNumber(in); got != want {
			t.Errorf("jsNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

// diff shows where two texts part ways.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return "first difference at byte " + strconv.Itoa(i) + "\n got: …" + quoteRange(got, from, i+60) + "\nwant: …" + quoteRange(want, from, i+60)
}

func quoteRange(s string, from, to int) string {
	return strings.ReplaceAll(s[min(from, len(s)):min(to, len(s))], "\n", `\n`)
}
