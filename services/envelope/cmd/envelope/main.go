// Command envelope runs the envelope stage: aptix.retrieved → aptix.enveloped
// (AGN-002 context block + AGN-003 /responses body). Configured from the
// environment: APTIX_NATS_URL, APTIX_NATS_CREDS, APTIX_PROFILES (profiles
// file), APTIX_CONTEXT_MAX_CHARS, APTIX_CONVERSATION_CONTEXTS (a JSON file of
// ConversationContexts by id), and the server-side tool loop's
// APTIX_MCP_DEFAULT_ALL, APTIX_MAX_TOOL_DEPTH and APTIX_MCP_ALLOW_URLS.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/contextblock"
	"github.com/aptix-dev/aptix/services/envelope/request"
	"github.com/aptix-dev/aptix/services/envelope/stage"
)

func main() {
	pipeline.Main("envelope", func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream, _ *slog.Logger) (pipeline.Stage, error) {
		set, err := profiles.FromEnv()
		if err != nil {
			return pipeline.Stage{}, err
		}
		contexts := map[string]contracts.ConversationContext{}
		if f := os.Getenv("APTIX_CONVERSATION_CONTEXTS"); f != "" {
			data, err := os.ReadFile(f)
			if err != nil {
				return pipeline.Stage{}, err
			}
			if err := json.Unmarshal(data, &contexts); err != nil {
				return pipeline.Stage{}, fmt.Errorf("%s: %w", f, err)
			}
		}
		convs, err := pipeline.OpenConversations(ctx, js, pipeline.ReplicasFromEnv())
		if err != nil {
			return pipeline.Stage{}, err
		}
		mcpOpts, err := request.MCPOptionsFromEnv()
		if err != nil {
			return pipeline.Stage{}, err
		}
		budget, _ := strconv.Atoi(os.Getenv("APTIX_CONTEXT_MAX_CHARS"))
		e := &stage.Envelope{Profiles: set, Contexts: contexts, Conversations: convs, Budget: contextblock.Options{MaxChars: budget}, MCP: mcpOpts}
		return e.Stage(), nil
	})
}
