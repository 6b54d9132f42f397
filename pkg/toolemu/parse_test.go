package toolemu

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

var (
	webSearch = Tool{Name: "webSearch", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string"},"chatHistory":{"type":"array"}},"required":["query"]}`)}
	// getWeather is strict: its arguments are held to the full schema.
	getWeather = Tool{Name: "get_weather", Strict: true, Parameters: []byte(`{"type":"object","properties":{` +
		`"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer","minimum":1},` +
		`"opts":{"type":"object","properties":{"hourly":{"type":"boolean"}},"required":["hourly"],"additionalProperties":false},` +
		`"tags":{"type":"array","items":{"type":"string"}}},"required":["city","unit"],"additionalProperties":false}`)}
	testTools = []Tool{getFileTree, writeToFile, webSearch, getWeather}
)

// counterIDs numbers ids, so results are comparable.
func counterIDs() Option {
	var n atomic.Int64
	return WithIDs(func(prefix string) string { return fmt.Sprintf("%s%d", prefix, n.Add(1)) })
}

func newTestParser(t testing.TB, choice Choice) *Parser {
	t.Helper()
	p, err := NewParser(testTools, choice, counterIDs())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type wantCall struct{ name, args string }

type parseCase struct {
	name  string
	in    string
	text  string
	calls []wantCall
	warn  []string // substrings, one per expected warning
}

// parseCases is the output contract of the seed, well-formed and not.
var parseCases = []parseCase{
	{name: "plain text", in: "No tool needed.", text: "No tool needed."},
	{name: "seed format", in: `<tool_call>{"name":"getFileTree","arguments":"{}"}</tool_call>`,
		calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "seed exact example", in: `<tool_call>{"name":"webSearch","arguments":"{\"query\":\"example\",\"chatHistory\":[]}"}</tool_call>`,
		calls: []wantCall{{"webSearch", `{"query":"example","chatHistory":[]}`}}},
	{name: "seed per-tool example", in: `<tool_call>{"name":"writeToFile","arguments":"{\"path\":\"example.md\",\"content\":\"example\"}"}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"path":"example.md","content":"example"}`}}},
	{name: "several calls with text around",
		in:    "Let me look.\n<tool_call>{\"name\":\"getFileTree\",\"arguments\":\"{}\"}</tool_call>\nThen write:\n<tool_call>{\"name\":\"writeToFile\",\"arguments\":\"{\\\"path\\\":\\\"a.md\\\",\\\"content\\\":\\\"hi\\\"}\"}</tool_call>\nDone.",
		text:  "Let me look.\n\nThen write:\n\nDone.",
		calls: []wantCall{{"getFileTree", "{}"}, {"writeToFile", `{"path":"a.md","content":"hi"}`}}},
	{name: "adjacent calls", in: `<tool_call>{"name":"getFileTree"}</tool_call><tool_call>{"name":"getFileTree"}</tool_call>`,
		calls: []wantCall{{"getFileTree", "{}"}, {"getFileTree", "{}"}}},
	{name: "arguments as an object", in: `<tool_call>{"name":"writeToFile","arguments":{"path":"a.md", "content":"x"}}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"path":"a.md","content":"x"}`}}},
	{name: "arguments missing", in: `<tool_call>{"name":"getFileTree"}</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "arguments null", in: `<tool_call>{"name":"getFileTree","arguments":null}</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "arguments empty string", in: `<tool_call>{"name":"getFileTree","arguments":""}</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "arguments string kept as written", in: `<tool_call>{"name":"webSearch","arguments":"{ \"query\" : \"a b\" }"}</tool_call>`,
		calls: []wantCall{{"webSearch", `{ "query" : "a b" }`}}},
	{name: "whitespace inside the tag", in: "<tool_call>\n  {\"name\": \"getFileTree\", \"arguments\": \"{}\"}\n</tool_call>",
		calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "code fence", in: "<tool_call>\n```json\n{\"name\":\"getFileTree\",\"arguments\":\"{}\"}\n```\n</tool_call>",
		calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "code fence without info string", in: "<tool_call>```{\"name\":\"getFileTree\"}```</tool_call>",
		calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "one-element array (the seed's Bad example)", in: `<tool_call>[{"name":"webSearch","arguments":"{\"query\":\"q\"}"}]</tool_call>`,
		calls: []wantCall{{"webSearch", `{"query":"q"}`}}},
	{name: "array missing its closing bracket", in: `<tool_call>[{"name":"getFileTree","arguments":"{}"}</tool_call>`,
		calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "two-element array", in: `<tool_call>[{"name":"getFileTree"},{"name":"getFileTree"}]</tool_call>`,
		text: `<tool_call>[{"name":"getFileTree"},{"name":"getFileTree"}]</tool_call>`, warn: []string{"array of 2 elements"}},
	{name: "repeated closing tag", in: `<tool_call>{"name":"getFileTree","arguments":"{}"}</tool_call></tool_call> after`,
		text: " after", calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "repeated closing tag with space between", in: "a<tool_call>{\"name\":\"getFileTree\"}</tool_call>\n</tool_call>\n\nb",
		text: "a\n\nb", calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "closing tag inside a JSON string", in: `<tool_call>{"name":"writeToFile","arguments":"{\"path\":\"t.md\",\"content\":\"use </tool_call> to end\"}"}</tool_call>tail`,
		text: "tail", calls: []wantCall{{"writeToFile", `{"path":"t.md","content":"use </tool_call> to end"}`}}},
	{name: "closing tag inside an object argument", in: `<tool_call>{"name":"writeToFile","arguments":{"path":"t.md","content":"a</tool_call>b \"q\" \\"}}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"path":"t.md","content":"a</tool_call>b \"q\" \\"}`}}},
	{name: "opening tag inside a JSON string", in: `<tool_call>{"name":"writeToFile","arguments":{"path":"t.md","content":"<tool_call>"}}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"path":"t.md","content":"<tool_call>"}`}}},
	{name: "unclosed final block", in: `Sure. <tool_call>{"name":"getFileTree","arguments":"{}"}`,
		text: "Sure. ", calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "unclosed final block, cut short", in: `Sure. <tool_call>{"name":"getFileTree","argu`,
		text: `Sure. <tool_call>{"name":"getFileTree","argu`, warn: []string{"not JSON"}},
	{name: "a block left open before the next one", in: `<tool_call>{"name":"getFileTree"}<tool_call>{"name":"webSearch","arguments":{"query":"x"}}</tool_call>`,
		calls: []wantCall{{"getFileTree", "{}"}, {"webSearch", `{"query":"x"}`}}},
	{name: "unbalanced quote falls back to the first closing tag", in: `<tool_call>{"name":"getFileTree","arguments":"{}}</tool_call> rest`,
		text: `<tool_call>{"name":"getFileTree","arguments":"{}}</tool_call> rest`, warn: []string{"not JSON"}},
	{name: "trailing commas", in: `<tool_call>{"name":"writeToFile","arguments":{"path":"a.md","content":"x",},}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"path":"a.md","content":"x"}`}}},
	{name: "trailing comma inside the arguments string", in: `<tool_call>{"name":"webSearch","arguments":"{\"query\":\"x\",}"}</tool_call>`,
		calls: []wantCall{{"webSearch", `{"query":"x"}`}}},
	{name: "comma inside a string is not repaired", in: `<tool_call>{"name":"webSearch","arguments":{"query":"a,}"}}</tool_call>`,
		calls: []wantCall{{"webSearch", `{"query":"a,}"}`}}},
	{name: "stray > after the JSON", in: `<tool_call>{"name":"getFileTree","arguments":"{}"}></tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "stray > before the JSON", in: `<tool_call>>{"name":"getFileTree","arguments":"{}"}</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "extra closing brace", in: `<tool_call>{"name":"getFileTree","arguments":"{}"}}</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "stray ] after the JSON", in: `<tool_call>{"name":"getFileTree","arguments":"{}"}]</tool_call>`, calls: []wantCall{{"getFileTree", "{}"}}},
	{name: "stray characters in the arguments string", in: `<tool_call>{"name":"webSearch","arguments":"{\"query\":\"x\"}}"}</tool_call>`,
		calls: []wantCall{{"webSearch", `{"query":"x"}`}}},
	{name: "other trailing text is not repaired", in: `<tool_call>{"name":"getFileTree"} and more</tool_call>`,
		text: `<tool_call>{"name":"getFileTree"} and more</tool_call>`, warn: []string{"unexpected text after the JSON"}},
	{name: "unknown tool", in: `Calling: <tool_call>{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}</tool_call>`,
		text: `Calling: <tool_call>{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}</tool_call>`, warn: []string{`unknown tool "shell"`}},
	{name: "no name", in: `<tool_call>{"arguments":"{}"}</tool_call>`, text: `<tool_call>{"arguments":"{}"}</tool_call>`, warn: []string{`no "name"`}},
	{name: "arguments not an object", in: `<tool_call>{"name":"getFileTree","arguments":"[1]"}</tool_call><tool_call>{"name":"getFileTree","arguments":5}</tool_call>`,
		text: `<tool_call>{"name":"getFileTree","arguments":"[1]"}</tool_call><tool_call>{"name":"getFileTree","arguments":5}</tool_call>`,
		warn: []string{"does not hold a JSON object", "must be a JSON object"}},
	{name: "arguments string not JSON", in: `<tool_call>{"name":"webSearch","arguments":"query=x"}</tool_call>`,
		text: `<tool_call>{"name":"webSearch","arguments":"query=x"}</tool_call>`, warn: []string{"arguments string is not JSON"}},
	{name: "empty block", in: `x<tool_call></tool_call>y`, text: `x<tool_call></tool_call>y`, warn: []string{"empty"}},
	{name: "not a tag", in: "a <tool_calls> b <tool_call b </tool_call> c", text: "a <tool_calls> b <tool_call b </tool_call> c"},
	{name: "good call next to a bad one", in: `<tool_call>{"name":"nope"}</tool_call> and <tool_call>{"name":"getFileTree"}</tool_call>`,
		text: `<tool_call>{"name":"nope"}</tool_call> and `, calls: []wantCall{{"getFileTree", "{}"}}, warn: []string{`unknown tool "nope"`}},

	// Strict tools: the full schema is enforced; a failure leaves the block as text.
	{name: "strict valid", in: `<tool_call>{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"c\",\"days\":3,\"opts\":{\"hourly\":true},\"tags\":[\"a\"]}"}</tool_call>`,
		calls: []wantCall{{"get_weather", `{"city":"Paris","unit":"c","days":3,"opts":{"hourly":true},"tags":["a"]}`}}},
	{name: "strict wrong type", in: `<tool_call>{"name":"get_weather","arguments":{"city":7,"unit":"c"}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":7,"unit":"c"}}</tool_call>`, warn: []string{`strict tool "get_weather"`}},
	{name: "strict enum", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"kelvin"}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"kelvin"}}</tool_call>`, warn: []string{"/unit"}},
	{name: "strict required", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>`, warn: []string{"missing property 'unit'"}},
	{name: "strict additionalProperties", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","country":"NO"}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","country":"NO"}}</tool_call>`, warn: []string{"country"}},
	{name: "strict nested object", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","opts":{"hourly":"yes"}}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","opts":{"hourly":"yes"}}}</tool_call>`, warn: []string{"/opts/hourly"}},
	{name: "strict nested array", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","tags":["a",2]}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","tags":["a",2]}}</tool_call>`, warn: []string{"/tags/1"}},
	{name: "strict minimum", in: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","days":0}}</tool_call>`,
		text: `<tool_call>{"name":"get_weather","arguments":{"city":"Oslo","unit":"c","days":0}}</tool_call>`, warn: []string{"/days"}},
	{name: "non-strict tools are not validated", in: `<tool_call>{"name":"writeToFile","arguments":{"unexpected":1}}</tool_call>`,
		calls: []wantCall{{"writeToFile", `{"unexpected":1}`}}},
}

func TestParse(t *testing.T) {
	p := newTestParser(t, Choice{})
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, p.Parse(tc.in))
		})
	}
}

func checkResult(t *testing.T, tc parseCase, r Result) {
	t.Helper()
	if r.Text != tc.text {
		t.Errorf("text %q, want %q", r.Text, tc.text)
	}
	if len(r.Calls) != len(tc.calls) {
		t.Fatalf("calls %+v, want %+v (warnings %q)", r.Calls, tc.calls, r.Warnings)
	}
	for i, c := range r.Calls {
		if c.Name != tc.calls[i].name || c.Arguments != tc.calls[i].args {
			t.Errorf("call %d: %s %s, want %s %s", i, c.Name, c.Arguments, tc.calls[i].name, tc.calls[i].args)
		}
		if !strings.HasPrefix(c.ID, "call_") {
			t.Errorf("call id %q", c.ID)
		}
		if raw := tc.in[c.Start:c.End]; !strings.HasPrefix(raw, openTag) {
			t.Errorf("call %d spans %q, not a block", i, raw)
		}
	}
	if len(r.Warnings) != len(tc.warn) {
		t.Fatalf("warnings %q, want %d matching %q", r.Warnings, len(tc.warn), tc.warn)
	}
	for i, w := range tc.warn {
		if !strings.Contains(r.Warnings[i], w) || !strings.HasPrefix(r.Warnings[i], "tool emulation: ") {
			t.Errorf("warning %q does not say %q", r.Warnings[i], w)
		}
	}
}

// TestParseToolChoice: none disables parsing (the seed); required and forced
// warn when the model did not comply, keeping what it did call.
func TestParseToolChoice(t *testing.T) {
	call := `<tool_call>{"name":"getFileTree","arguments":"{}"}</tool_call>`
	none := newTestParser(t, Choice{Mode: ChoiceNone})
	checkResult(t, parseCase{in: call, text: call, warn: []string{"tool_choice is none"}}, none.Parse(call))
	checkResult(t, parseCase{in: "plain", text: "plain"}, none.Parse("plain"))

	req := newTestParser(t, Choice{Mode: ChoiceRequired})
	checkResult(t, parseCase{in: "plain", text: "plain", warn: []string{"tool_choice is required but the model emitted no <tool_call>"}}, req.Parse("plain"))
	checkResult(t, parseCase{in: call, calls: []wantCall{{"getFileTree", "{}"}}}, req.Parse(call))

	forced := newTestParser(t, Choice{Mode: ChoiceForced, Name: "webSearch"})
	checkResult(t, parseCase{in: call, calls: []wantCall{{"getFileTree", "{}"}}, warn: []string{`tool_choice forces "webSearch" but the model did not call it`}}, forced.Parse(call))
}

func TestNewParserRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		tools  []Tool
		choice Choice
	}{
		"duplicate":          {[]Tool{getFileTree, getFileTree}, Choice{}},
		"forced unknown":     {[]Tool{getFileTree}, Choice{Mode: ChoiceForced, Name: "x"}},
		"strict bad schema":  {[]Tool{{Name: "s", Strict: true, Parameters: []byte(`{"type":12}`)}}, Choice{}},
		"strict not JSON":    {[]Tool{{Name: "s", Strict: true, Parameters: []byte(`{`)}}, Choice{}},
		"strict remote $ref": {[]Tool{{Name: "s", Strict: true, Parameters: []byte(`{"$ref":"file:///etc/passwd"}`)}}, Choice{}},
	} {
		if _, err := NewParser(tc.tools, tc.choice); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestParseChoice(t *testing.T) {
	for raw, want := range map[string]Choice{
		``:                               {Mode: ChoiceAuto},
		`null`:                           {Mode: ChoiceAuto},
		`"auto"`:                         {Mode: ChoiceAuto},
		`"none"`:                         {Mode: ChoiceNone},
		`"required"`:                     {Mode: ChoiceRequired},
		`{"type":"function","name":"f"}`: {Mode: ChoiceForced, Name: "f"},
		`{"type":"function","function":{"name":"g"}}`: {Mode: ChoiceForced, Name: "g"},
	} {
		got, err := ParseChoice([]byte(raw))
		if err != nil || got != want {
			t.Errorf("ParseChoice(%s) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"sometimes"`, `{"type":"tool","name":"f"}`, `{"type":"function"}`, `7`} {
		if _, err := ParseChoice([]byte(raw)); err == nil {
			t.Errorf("ParseChoice(%s): want an error", raw)
		}
	}
}

func TestDecodeTools(t *testing.T) {
	tools, err := DecodeTools([]byte(`[{"type":"function","name":"a","description":"d","parameters":{"type":"object"},"strict":true},` +
		`{"type":"web_search"},{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "a" || !tools[0].Strict || tools[0].Description != "d" || tools[1].Name != "b" || tools[1].Strict {
		t.Fatalf("%+v", tools)
	}
	if _, err := DecodeTools([]byte(`[{"type":"function"}]`)); err == nil {
		t.Fatal("a function tool without a name must be an error")
	}
}

// TestStrictWarningIsStable: the validator walks maps, so without sorting
// the same answer could get differently ordered warnings from run to run
// (FuzzParse found this comparing streamed and whole-text parses).
func TestStrictWarningIsStable(t *testing.T) {
	p := newTestParser(t, Choice{})
	in := `<tool_call>{"name":"get_weather","arguments":{"z":1,"a":2,"m":3,"city":4,"unit":5}}</tool_call>`
	first := p.Parse(in).Warnings
	want := `at '': additional properties 'a', 'm', 'z' not allowed; at '/city': got number, want string; at '/unit': got number, want string`
	if len(first) != 1 || !strings.HasSuffix(first[0], want) {
		t.Fatalf("warnings %q", first)
	}
	for range 50 {
		if got := p.Parse(in).Warnings; got[0] != first[0] {
			t.Fatalf("warning changed between runs:\n%s\n%s", got[0], first[0])
		}
	}
}
