package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// direct is the floor of the LLM path: openai-go posting the same /responses
// body Aptix sends, straight to the sandbox.
func direct(ctx context.Context, baseURL string, body []byte, n, concurrency int) Load {
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sandbox"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}))
	return closedLoop(ctx, n, concurrency, func(ctx context.Context, _ int) error {
		var raw json.RawMessage
		if err := client.Post(ctx, "responses", body, &raw, option.WithHeader("Content-Type", "application/json")); err != nil {
			return fmt.Errorf("direct call: %w", err)
		}
		if len(raw) == 0 {
			return fmt.Errorf("direct call: empty body")
		}
		return nil
	})
}
