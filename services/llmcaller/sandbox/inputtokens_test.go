package sandbox_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestInputTokens: POST /v1/responses/input_tokens counts what the same
// create would be billed (its usage.input_tokens), with and without a
// previous response, and is no model call.
func TestInputTokens(t *testing.T) {
	client, srv := newSDK(t, sandbox.Options{})
	ctx := context.Background()
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Remember the word: teal.")}})
	if err != nil {
		t.Fatal(err)
	}
	before := srv.Requests()
	count := func(p responses.InputTokenCountParams) int64 {
		t.Helper()
		res, err := client.Responses.InputTokens.Count(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Object != "response.input_tokens" {
			t.Fatalf("object %q", res.Object)
		}
		return res.InputTokens
	}
	input := responses.InputTokenCountParamsInputUnion{OfString: openai.String("What was the word?")}
	alone := count(responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: input})
	chained := count(responses.InputTokenCountParams{Model: openai.String("sandbox-1"), Input: input, PreviousResponseID: openai.String(first.ID)})
	if srv.Requests() != before {
		t.Fatalf("counting made a model call")
	}
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What was the word?")}})
	if err != nil {
		t.Fatal(err)
	}
	if alone <= 0 || chained <= alone || chained != second.Usage.InputTokens {
		t.Fatalf("alone %d chained %d, the create billed %d", alone, chained, second.Usage.InputTokens)
	}
	_, err = client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Input: input, PreviousResponseID: openai.String("resp_nope")})
	if err == nil {
		t.Fatal("an unknown previous_response_id was counted")
	}
}
