// Command firstturn sends two turns to Aptix's HTTP gateway with the OpenAI
// Go SDK: a first response, then one that continues it. README.md runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func main() {
	baseURL := flag.String("base-url", "http://127.0.0.1:8080/v1", "the gateway's /v1 URL")
	flag.Parse()
	ctx := context.Background()
	// Any key does while the gateway runs with APTIX_AUTH=none.
	client := openai.NewClient(option.WithBaseURL(*baseURL), option.WithAPIKey("unused"))

	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Explain the retry policy")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID, r.OutputText()) // resp_…: Aptix's id, never the upstream's

	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "sandbox-1",
		PreviousResponseID: openai.String(r.ID), // continues r; an older id branches
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("Now in one line")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r2.ID, r2.OutputText())
}
