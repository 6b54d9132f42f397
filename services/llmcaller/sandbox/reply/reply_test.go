package reply_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// validate checks doc against schema with a real JSON Schema validator
// (draft 2020-12 unless the schema says otherwise).
func validate(t *testing.T, schema, doc string) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sdoc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	if err := c.AddResource("schema.json", sdoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("%q is not JSON: %v", doc, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s does not validate against %s: %v", doc, schema, err)
	}
}

// Every schema of the subset the rules list gets a document that a real
// validator accepts.
func TestValueValidates(t *testing.T) {
	schemas := map[string]string{
		"flat object": `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":18,"maximum":99},
			"score":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"ok":{"type":"boolean"},"none":{"type":"null"}},
			"required":["name","age","score","ok","none"],"additionalProperties":false}`,
		"enum and const": `{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]},"v":{"const":3}},"required":["unit","v"]}`,
		"nested": `{"type":"object","properties":{"user":{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","minLength":3},"minItems":2,"uniqueItems":true},
			"address":{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["zip"]}},"required":["tags","address"]}},"required":["user"]}`,
		"anyOf and oneOf": `{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"integer","multipleOf":7,"minimum":10}]},
			"b":{"oneOf":[{"type":"string","format":"email"},{"type":"integer"}]}},"required":["a","b"]}`,
		"allOf": `{"allOf":[{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},{"properties":{"y":{"type":"integer"}},"required":["y"]}]}`,
		"refs": `{"$defs":{"step":{"type":"object","properties":{"explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],"additionalProperties":false}},
			"type":"object","properties":{"steps":{"type":"array","items":{"$ref":"#/$defs/step"}},"final_answer":{"type":"string"}},"required":["steps","final_answer"],"additionalProperties":false}`,
		"recursive":         `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","children"]}},"$ref":"#/$defs/node"}`,
		"type list":         `{"type":"object","properties":{"n":{"type":["null","number"],"maximum":-5}},"required":["n"]}`,
		"formats":           `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},"site":{"type":"string","format":"uri"}},"required":["when","id","site"]}`,
		"tuple":             `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string","enum":["x"]}],"minItems":2}`,
		"min props":         `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"minProperties":2}`,
		"max length":        `{"type":"object","properties":{"code":{"type":"string","minLength":2,"maxLength":4}},"required":["code"]}`,
		"empty array":       `{"type":"object","properties":{"xs":{"type":"array","maxItems":0}},"required":["xs"]}`,
		"string alone":      `{"type":"string","maxLength":3}`,
		"draft-4 exclusive": `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":5,"exclusiveMinimum":true}},"required":["n"]}`,
	}
	for name, schema := range schemas {
		t.Run(name, func(t *testing.T) {
			for _, text := range []string{"", "Plan a trip to New York for 3 people on 2025-06-01, email me at a@b.co, in fahrenheit"} {
				doc, err := reply.Value(json.RawMessage(schema), text)
				if err != nil {
					t.Fatal(err)
				}
				validate(t, schema, doc)
			}
		})
	}
}

// Properties are written in the order the schema declares them, as a
// model's structured output is.
func TestValueKeepsDeclaredOrder(t *testing.T) {
	doc, err := reply.Value(json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"},"mid":{"type":"boolean"}},"required":["alpha","mid","zeta"]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if doc != `{"zeta":1,"alpha":"sandbox","mid":true}` {
		t.Fatalf("got %s", doc)
	}
}

func TestValueRejectsBadSchemas(t *testing.T) {
	for _, bad := range []string{`{"type":`, `[1,2]`, `"string"`, `{} {}`} {
		if _, err := reply.Value(json.RawMessage(bad), ""); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

var weather = reply.Tool{Name: "get_weather", Description: "Get the current weather for a location",
	Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
		"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`)}

var searchTools = []reply.Tool{
	{Name: "add", Description: "Adds two numbers.", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
	{Name: "search_docs", Description: "Search the documentation for a query", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query","limit"]}`)},
	{Name: "send_email", Description: "Send an email message to a recipient", Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}},"required":["to","subject"]}`)},
	weather,
}

// The request picks the tool that shares words with it, its arguments
// take the values it names, and a request that names no tool calls none.
func TestToolCallAuto(t *testing.T) {
	tests := []struct {
		text, name, args string
	}{
		{"What's the weather like in San Francisco?", "get_weather", `{"location":"San Francisco"}`},
		{"Use the weather tool to get the temperature in Austin, TX in fahrenheit.", "get_weather", `{"location":"Austin, TX","unit":"fahrenheit"}`},
		{"Please add 2 and 40.", "add", `{"a":2,"b":40}`},
		{"Search the docs for \"retry policy\", top 5 results", "search_docs", `{"query":"Search the docs for \"retry policy\", top 5 results","limit":5}`},
		{"Send an email to ops@example.com about the \"outage\"", "send_email", `{"to":"ops@example.com","subject":"outage"}`},
		{"Weather forecasts for Rio de Janeiro", "get_weather", `{"location":"Rio de Janeiro"}`},
		{"Say hello in exactly 3 words.", "", ""},
		{"Count from 1 to 5.", "", ""},
		{"What is my name?", "", ""},
	}
	for _, tt := range tests {
		c, ok, err := reply.ToolCall(tt.text, searchTools, reply.Choice{Mode: "auto"}, false)
		if err != nil {
			t.Fatalf("%q: %v", tt.text, err)
		}
		if !ok {
			if tt.name != "" {
				t.Errorf("%q: no call, want %s", tt.text, tt.name)
			}
			continue
		}
		if c.Name != tt.name || c.Arguments != tt.args {
			t.Errorf("%q: called %s %s, want %s %s", tt.text, c.Name, c.Arguments, tt.name, tt.args)
		}
	}
}

// tool_choice: auto never calls once an output came back, none never
// calls, required and a named function always do.
func TestToolCallChoices(t *testing.T) {
	q := "What's the weather like in San Francisco?"
	if _, ok, _ := reply.ToolCall(q, searchTools, reply.Choice{Mode: "auto"}, true); ok {
		t.Error("auto called a tool after its output came back")
	}
	if _, ok, _ := reply.ToolCall(q, searchTools, reply.Choice{Mode: "none"}, false); ok {
		t.Error("none called a tool")
	}
	if c, ok, _ := reply.ToolCall(q, searchTools, reply.Choice{Mode: "required"}, true); !ok || c.Name != "get_weather" {
		t.Errorf("required: %v %+v, want the best match", ok, c)
	}
	if c, ok, _ := reply.ToolCall("Say hello.", searchTools, reply.Choice{Mode: "required"}, false); !ok || c.Name != "add" || c.Arguments != `{"a":1,"b":1}` {
		t.Errorf("required without a match: %v %+v, want the first tool", ok, c)
	}
	c, ok, _ := reply.ToolCall("Use the weather tool to get the temperature in San Francisco.", searchTools, reply.Choice{Mode: "function", Name: "get_weather"}, true)
	if !ok || c.Name != "get_weather" || c.Arguments != `{"location":"San Francisco"}` {
		t.Errorf("named: %v %+v", ok, c)
	}
	if _, _, err := reply.ToolCall(q, searchTools, reply.Choice{Mode: "function", Name: "nope"}, false); err == nil {
		t.Error("a named tool that is not there was called")
	}
	bad := []reply.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":`)}}
	if _, _, err := reply.ToolCall(q, bad, reply.Choice{Mode: "auto"}, false); err == nil {
		t.Error("a broken parameters schema went unnoticed")
	}
}

func TestFormats(t *testing.T) {
	schema := `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city","days"],"additionalProperties":false}`
	f, err := reply.ResponsesFormat(json.RawMessage(`{"format":{"type":"json_schema","name":"trip","strict":true,"schema":` + schema + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := reply.Text(f, "the sentence", "Plan 4 days in Lisbon")
	if err != nil || got != `{"city":"Lisbon","days":4}` {
		t.Fatalf("json_schema: %s %v", got, err)
	}
	validate(t, schema, got)

	cf, err := reply.ChatFormat(json.RawMessage(`{"type":"json_schema","json_schema":{"name":"trip","schema":` + schema + `}}`))
	if err != nil || string(cf.Schema) != schema {
		t.Fatalf("chat format %+v %v", cf, err)
	}
	obj, _ := reply.ResponsesFormat(json.RawMessage(`{"format":{"type":"json_object"}}`))
	if got, _ := reply.Text(obj, `say "hi"`, ""); got != `{"sandbox":true,"reply":"say \"hi\""}` {
		t.Fatalf("json_object: %s", got)
	}
	plain, _ := reply.ResponsesFormat(json.RawMessage(`{"verbosity":"low"}`))
	if got, _ := reply.Text(plain, "the sentence", ""); got != "the sentence" {
		t.Fatalf("text: %s", got)
	}
	for _, bad := range []string{`{"format":{"type":"json_schema","name":"x"}}`, `{"format":{"type":"json_schema","schema":{"type":}}}`, `{"format":{"type":"yaml"}}`} {
		if _, err := reply.ResponsesFormat(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestRequestDropsContextAndMode(t *testing.T) {
	texts := []string{"[MODE: ASK]\n\n[INSTRUCTION]\nWhat's the weather like in Oslo?", "[CONTEXT]\n=== CHUNK 1 ===\nId: c1\nget_weather(\"Paris\")"}
	if got := reply.Request(texts); got != "What's the weather like in Oslo?" {
		t.Fatalf("request %q", got)
	}
	if got := reply.Sentence(texts, ""); got != "Sandbox reply (mode ASK) to: What's the weather like in Oslo?. Context chunks: c1." {
		t.Fatalf("sentence %q", got)
	}
}
