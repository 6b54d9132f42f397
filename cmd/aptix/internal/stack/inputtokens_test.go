package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestInputTokens: POST /v1/responses/input_tokens with openai-go's
// Responses.InputTokens.Count, through a gateway whose backend serves the
// endpoint (the sandbox: forwarded, with the upstream response the
// previous one continued) and one whose backend does not (counted by the
// gateway with OpenAI's BPE over the replayed history); another caller's
// previous_response_id is 404 on both.
func TestInputTokens(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, _, _ := keys.Create(ctx, "alice", "", 0)
	bob, _, _ := keys.Create(ctx, "bob", "", 0)
	served := countsUpstream(e)
	local := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	fwd := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, served)
	a := as(local, alice)

	first, err := a.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Instructions: openai.String("You are terse."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Remember the word: teal.")}})
	if err != nil {
		t.Fatal(err)
	}
	question := responses.InputTokenCountParamsInputUnion{OfString: openai.String("What was the word? Answer with the word alone.")}
	count := func(url, key string, p responses.InputTokenCountParams) (int64, error) {
		c := as(url, key)
		res, err := c.Responses.InputTokens.Count(ctx, p)
		if err != nil {
			return 0, err
		}
		if res.Object != "response.input_tokens" {
			t.Fatalf("object %q", res.Object)
		}
		return res.InputTokens, nil
	}
	chained := responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question, PreviousResponseID: openai.String(first.ID)}
	alone := responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question}
	before := e.sb.Requests()
	results := map[string][2]int64{}
	for name, url := range map[string]string{"local": local, "forwarded": fwd} {
		c, err := count(url, alice, chained)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, err := count(url, alice, alone)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n <= 0 || c <= n {
			t.Fatalf("%s: alone %d, with the history %d", name, n, c)
		}
		results[name] = [2]int64{n, c}
		// Another caller's response does not exist for bob.
		_, err = count(url, bob, chained)
		apiError(t, err, 404, "previous_response_not_found")
		_, err = count(url, alice, responses.InputTokenCountParams{Input: question, PreviousResponseID: openai.String("resp_0000000000000000000000000000dead")})
		apiError(t, err, 404, "previous_response_not_found")
	}
	if e.sb.Requests() != before {
		t.Fatal("counting ran a model call")
	}
	// The forwarded count is what the turn is billed, but for the envelope's
	// own framing of the instruction (a few bytes).
	second, err := a.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What was the word? Answer with the word alone.")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counts %v, billed %d", results, second.Usage.InputTokens)
	if d := second.Usage.InputTokens - results["forwarded"][1]; d < 0 || d > 12 {
		t.Fatalf("forwarded count %d, the turn was billed %d", results["forwarded"][1], second.Usage.InputTokens)
	}
	// Tools and instructions count; personality is accepted and named as ignored.
	st, h, body := call(t, "POST", local+"/v1/responses/input_tokens",
		`{"model":"sandbox-1","instructions":"You are terse.","personality":"friendly","tools":[{"type":"function","name":"lookup","description":"Looks a word up in the dictionary.","parameters":{"type":"object","properties":{"word":{"type":"string"}}}}]}`,
		bearer(alice))
	if st != 200 || h.Get("X-Aptix-Ignored-Params") != "personality" || !strings.Contains(body, `"object":"response.input_tokens"`) {
		t.Fatalf("%d %v %s", st, h, body)
	}
	st, _, _ = call(t, "POST", local+"/v1/responses/input_tokens", `{"model":"sandbox-1","input":"x"}`, nil)
	if st != 401 {
		t.Fatalf("no credentials: %d", st)
	}
}

// TestInputTokensConversation: a count in a conversation object (its id,
// or {"id":...}) counts the object's items ahead of the input, as a create
// in it sends them, through both a backend that serves the endpoint and
// the gateway's own tokenizer; the forwarded count is what the create in
// the conversation is then billed. Another caller's conversation is 404,
// conversation with previous_response_id 400, as on create.
func TestInputTokensConversation(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, _, _ := keys.Create(ctx, "alice", "", 0)
	bob, _, _ := keys.Create(ctx, "bob", "", 0)
	served := countsUpstream(e)
	local := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	fwd := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{}, served)
	a := as(fwd, alice)
	conv, err := a.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{
		say("user", "The code word is plum. Keep it in mind for the rest of this conversation, whatever comes next.")}})
	if err != nil {
		t.Fatal(err)
	}
	question := responses.InputTokenCountParamsInputUnion{OfString: openai.String("What is the code word?")}
	byID := responses.InputTokenCountParamsConversationUnion{OfString: openai.String(conv.ID)}
	byObject := responses.InputTokenCountParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: conv.ID}}
	count := func(url, key string, p responses.InputTokenCountParams) (int64, error) {
		c := as(url, key)
		res, err := c.Responses.InputTokens.Count(ctx, p)
		if err != nil {
			return 0, err
		}
		return res.InputTokens, nil
	}
	before := e.sb.Requests()
	results := map[string][2]int64{}
	for name, url := range map[string]string{"local": local, "forwarded": fwd} {
		alone, err := count(url, alice, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in, err := count(url, alice, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question, Conversation: byID})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		obj, err := count(url, alice, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question, Conversation: byObject})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The conversation's one message is some 20 tokens.
		if alone <= 0 || in < alone+10 || obj != in {
			t.Fatalf("%s: alone %d, in the conversation %d (as an object %d)", name, alone, in, obj)
		}
		results[name] = [2]int64{alone, in}
		_, err = count(url, bob, responses.InputTokenCountParams{Input: question, Conversation: byID})
		apiError(t, err, 404, "not_found")
		_, err = count(url, alice, responses.InputTokenCountParams{Input: question,
			Conversation: responses.InputTokenCountParamsConversationUnion{OfString: openai.String("conv_0000000000000000dead")}})
		apiError(t, err, 404, "not_found")
		_, err = count(url, alice, responses.InputTokenCountParams{Input: question, Conversation: byID, PreviousResponseID: openai.String("resp_x")})
		apiError(t, err, 400, "mutually_exclusive")
	}
	if e.sb.Requests() != before {
		t.Fatal("counting ran a model call")
	}
	res, err := a.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the code word?")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counts (alone, in the conversation) %v, billed %d", results, res.Usage.InputTokens)
	// As in TestInputTokens: the same but for the envelope's own framing.
	if d := res.Usage.InputTokens - results["forwarded"][1]; d < 0 || d > 12 {
		t.Fatalf("forwarded count %d, the create in the conversation was billed %d", results["forwarded"][1], res.Usage.InputTokens)
	}
	// The response joined the conversation: a count now includes its answer.
	after, err := count(fwd, alice, responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: question, Conversation: byID})
	if err != nil {
		t.Fatal(err)
	}
	if after <= results["forwarded"][1] {
		t.Fatalf("after a response in the conversation: %d, before %d", after, results["forwarded"][1])
	}
}

// TestInputTokensCompaction: a count whose input holds the gateway's
// compaction item counts what a create with it sends, the summary it
// stands for (opened by the gateway, as on create), not the sealed blob;
// an item that does not open is 400 invalid_encrypted_content, as on
// create.
func TestInputTokensCompaction(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	served := countsUpstream(e)
	keys, err := sealbox.Parse(sealbox.Generate())
	if err != nil {
		t.Fatal(err)
	}
	sameKeys := func(c *httpapi.Config) { c.CompactionKeys = keys } // two replicas of one deployment
	local, client := e.gateway(sameKeys)
	fwd, _ := e.gateway(served, sameKeys)
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The deploy key is K-77")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID)})
	if err != nil {
		t.Fatal(err)
	}
	item := c.Output[len(c.Output)-1].RawJSON()
	blob := c.Output[len(c.Output)-1].AsCompaction().EncryptedContent
	altered := func(s string) string { // another base64 character in place of each
		return strings.Map(func(r rune) rune {
			if r == 'A' {
				return 'B'
			}
			return 'A'
		}, s)
	}
	body := `{"model":"sandbox-1","input":[` + item + `,{"type":"message","role":"user","content":"What is the key?"}]}`
	counts := map[string]int{}
	for name, url := range map[string]string{"local": local, "forwarded": fwd} {
		st, _, out := call(t, "POST", url+"/v1/responses/input_tokens", body, nil)
		var res struct {
			InputTokens int `json:"input_tokens"`
		}
		if st != 200 || json.Unmarshal([]byte(out), &res) != nil || res.InputTokens <= 0 {
			t.Fatalf("%s: %d %s", name, st, out)
		}
		counts[name] = res.InputTokens
		bad := strings.Replace(body, blob, blob[:len(blob)-8]+altered(blob[len(blob)-8:]), 1)
		if st, _, out := call(t, "POST", url+"/v1/responses/input_tokens", bad, nil); st != 400 || !strings.Contains(out, "invalid_encrypted_content") {
			t.Fatalf("%s: an altered compaction item: %d %s", name, st, out)
		}
	}
	var input responses.ResponseInputParam
	if err := json.Unmarshal([]byte(`[`+item+`,{"type":"message","role":"user","content":"What is the key?"}]`), &input); err != nil {
		t.Fatal(err)
	}
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatal(err)
	}
	// The count leaves out only the envelope's framing of the instruction:
	// the same few tokens as for the question alone, as the same item (the
	// sandbox counts an item's bytes).
	question := `{"type":"message","role":"user","content":"What is the key?"}`
	st, _, out := call(t, "POST", fwd+"/v1/responses/input_tokens", `{"model":"sandbox-1","input":[`+question+`]}`, nil)
	var alone struct {
		InputTokens int `json:"input_tokens"`
	}
	if st != 200 || json.Unmarshal([]byte(out), &alone) != nil {
		t.Fatalf("%d %s", st, out)
	}
	var q responses.ResponseInputParam
	if err := json.Unmarshal([]byte(`[`+question+`]`), &q); err != nil {
		t.Fatal(err)
	}
	r0, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: q}})
	if err != nil {
		t.Fatal(err)
	}
	framing := int(r0.Usage.InputTokens) - alone.InputTokens
	t.Logf("counts %v, billed %d; the question alone counted %d, billed %d", counts, r2.Usage.InputTokens, alone.InputTokens, r0.Usage.InputTokens)
	if d := int(r2.Usage.InputTokens) - counts["forwarded"]; d != framing || framing < 0 || framing > 20 {
		t.Fatalf("forwarded count %d, the create was billed %d (framing %d)", counts["forwarded"], r2.Usage.InputTokens, framing)
	}
}

// countsUpstream is a gateway option whose sandbox profile claims the
// input-token endpoint, so counts are forwarded instead of counted locally.
func countsUpstream(e *env) func(*httpapi.Config) {
	return func(c *httpapi.Config) {
		p, _ := e.cfg.Profiles.Get("sandbox")
		p.Capabilities.InputTokens = true
		set := &profiles.Set{Default: "sandbox"}
		set.Put(p)
		c.Profiles = set
	}
}
