package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestGatewayTransparent: a plain client of the Responses API talks to the
// model, not to AGN-003 (docs/request.md#which-rule-applies-when). The
// upstream receives the client's instructions on the request that carries
// them and on no other, its input items as sent, and no [MODE] framing.
func TestGatewayTransparent(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)

	// 1. instructions and a string input.
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Instructions: openai.String("Be terse."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello")}})
	if err != nil {
		t.Fatal(err)
	}
	sent := sentBody(t, e.sb.LastRequest())
	if sent["instructions"] != "Be terse." {
		t.Errorf("turn 1 instructions %v, want the client's", sent["instructions"])
	}
	assertInput(t, "turn 1", sent, userText("Hello"))

	// 2. a continuation with new instructions and multi-part input: the new
	// instructions, the items as sent.
	items := `[{"type":"message","role":"developer","content":"Answer in French."},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"https://example.com/cat.png","detail":"low"}]}]`
	resp := createRaw(t, url, `{"model":"sandbox-1","previous_response_id":"`+r1.ID+`","instructions":"Be verbose.","input":`+items+`}`)
	sent = sentBody(t, e.sb.LastRequest())
	if sent["instructions"] != "Be verbose." || sent["previous_response_id"] == nil {
		t.Errorf("turn 2: instructions %v, previous_response_id %v", sent["instructions"], sent["previous_response_id"])
	}
	assertInput(t, "turn 2", sent, items)

	// 3. a continuation without instructions has none: OpenAI never carries
	// them over previous_response_id.
	createRaw(t, url, `{"model":"sandbox-1","previous_response_id":"`+resp["id"].(string)+`","input":"And now?"}`)
	sent = sentBody(t, e.sb.LastRequest())
	if _, ok := sent["instructions"]; ok {
		t.Errorf("turn 3 carried instructions %v from an earlier turn", sent["instructions"])
	}
	assertInput(t, "turn 3", sent, userText("And now?"))
}

// TestGatewayTransparentTools: a transparent continuation sends the tools
// its own request has, none when it sends none (OpenAI keeps no tools
// across previous_response_id), and its tool_choice as sent.
func TestGatewayTransparentTools(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	tools := `[{"type":"function","name":"lookup","description":"Look up","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":false}]`
	r1 := createRaw(t, url, `{"model":"sandbox-1","input":"Hi","tools":`+tools+`,"tool_choice":"none"}`)
	sent := sentBody(t, e.sb.LastRequest())
	if got, _ := json.Marshal(sent["tools"]); !jsonEqual(got, json.RawMessage(tools)) || sent["tool_choice"] != "none" {
		t.Errorf("turn 1 tools %s tool_choice %v", got, sent["tool_choice"])
	}
	createRaw(t, url, `{"model":"sandbox-1","previous_response_id":"`+r1["id"].(string)+`","input":"Again"}`)
	if sent = sentBody(t, e.sb.LastRequest()); sent["tools"] != nil {
		t.Errorf("turn 2 sent tools %v the request did not carry", sent["tools"])
	}
}

// TestGatewayAliasFraming: an alias whose rule declares agn003 framing gets
// Aptix's turn: the instructions as the first turn's system message and the
// [MODE]/[INSTRUCTION] user message; the aptix extension asks for the same.
func TestGatewayAliasFraming(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.Aliases = map[string]string{"code-assistant": "sandbox-1", "plain": "sandbox-1"}
		p.AliasRules = map[string]profiles.Alias{"code-assistant": {Model: "sandbox-1", Framing: "agn003", Mode: "ASK"}}
		c.Profiles.Put(p)
	})
	url, _ := e.gateway()
	createRaw(t, url, `{"model":"code-assistant","instructions":"You review code.","input":"Check this"}`)
	sent := sentBody(t, e.sb.LastRequest())
	in, _ := json.Marshal(sent["input"])
	if _, ok := sent["instructions"]; ok || !strings.Contains(string(in), `"role":"system"`) ||
		!strings.Contains(string(in), `[MODE: ASK]\n\n[INSTRUCTION]\nCheck this`) || sent["model"] != "sandbox-1" {
		t.Errorf("alias with framing: instructions %v, model %v, input %s", sent["instructions"], sent["model"], in)
	}
	createRaw(t, url, `{"model":"plain","instructions":"You review code.","input":"Check this"}`)
	sent = sentBody(t, e.sb.LastRequest())
	if sent["instructions"] != "You review code." {
		t.Errorf("plain alias: instructions %v", sent["instructions"])
	}
	assertInput(t, "plain alias", sent, userText("Check this"))
	createRaw(t, url, `{"model":"sandbox-1","input":"Check this","aptix":{"mode":"DDR"}}`)
	in, _ = json.Marshal(sentBody(t, e.sb.LastRequest())["input"])
	if !strings.Contains(string(in), `[MODE: DDR]`) {
		t.Errorf("aptix extension: input %s", in)
	}
}

// createRaw creates a response with a raw body and returns it decoded.
func createRaw(t *testing.T, url, body string) map[string]any {
	t.Helper()
	code, b := postJSON(t, url+"/v1/responses", body)
	if code != 200 {
		t.Fatalf("POST /v1/responses %s: %d %s", body, code, b)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// userText is a string input as the gateway sends it: one user message
// with one input_text part, the form OpenAI itself records it in.
func userText(s string) string {
	b, _ := json.Marshal(s)
	return `[{"type":"message","role":"user","content":[{"type":"input_text","text":` + string(b) + `}]}]`
}

// assertInput checks the upstream input is want, as JSON values.
func assertInput(t *testing.T, what string, sent map[string]any, want string) {
	t.Helper()
	got, _ := json.Marshal(sent["input"])
	if !jsonEqual(got, json.RawMessage(want)) {
		t.Errorf("%s: upstream input\n %s\nwant the client's\n %s", what, got, want)
	}
}
