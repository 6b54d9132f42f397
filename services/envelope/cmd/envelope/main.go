// Command envelope runs the envelope stage: aptix.retrieved → aptix.enveloped
// (AGN-002 context block + AGN-003 /responses body). Configured from the
// environment: APTIX_NATS_URL, APTIX_NATS_CREDS, APTIX_PROFILES (profiles
// file), APTIX_CONTEXT_MAX_CHARS, APTIX_CONVERSATION_CONTEXTS (a JSON file of
// ConversationContexts by id), and the server-side tool loop's
// APTIX_MCP_DEFAULT_ALL, APTIX_MAX_TOOL_DEPTH and APTIX_MCP_ALLOW_URLS.
package main

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/envelope/stage"
)

func main() {
	pipeline.Main("envelope", func(ctx context.Context, d pipeline.Deps) (pipeline.Stage, func(), error) {
		return stage.FromEnv(ctx, d, stage.Options{})
	})
}
