package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestGatewayCompactionBoundToPrincipal: a compaction item opens only in
// its own principal's requests. Bob pasting Alice's item into his input is
// 400 invalid_encrypted_content, and her summary never reaches the model
// in his request (it did: every principal's items were sealed alike).
func TestGatewayCompactionBoundToPrincipal(t *testing.T) {
	e := newEnv(t, sandbox.Options{Script: []string{"Noted.", "Summary: Alice's deploy key is K-77."}})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	aliceKey, _, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	bobKey, _, err := keys.Create(ctx, "bob", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	alice, bob := as(url, aliceKey), as(url, bobKey)
	r1, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("The deploy key is K-77")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := alice.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID)})
	if err != nil {
		t.Fatal(err)
	}
	blob := c.Output[len(c.Output)-1].AsCompaction().EncryptedContent
	send := func(client openai.Client) error {
		var input responses.ResponseInputParam
		if err := json.Unmarshal([]byte(`[{"type":"compaction","encrypted_content":"`+blob+`"},{"type":"message","role":"user","content":"What is the key?"}]`), &input); err != nil {
			t.Fatal(err)
		}
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		return err
	}
	calls := e.sb.Requests()
	ae := apiError(t, send(bob), 400, "invalid_encrypted_content")
	if ae.Param != "input[0]" {
		t.Fatalf("param %q: %s", ae.Param, ae.RawJSON())
	}
	if e.sb.Requests() != calls {
		t.Fatal("Bob's request with Alice's compaction item reached the model")
	}
	if err := send(alice); err != nil {
		t.Fatalf("Alice's own item: %v", err)
	}
	if sent := string(e.sb.LastRequest()); !strings.Contains(sent, "K-77") {
		t.Fatalf("Alice's summary did not reach the model in her request: %s", sent)
	}
}
