package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/request"
)

// Environment the envelope reads beyond the profiles and the tool loop's.
const (
	// EnvContexts is a JSON file of server-side ConversationContexts by id.
	EnvContexts = "APTIX_CONVERSATION_CONTEXTS"
	// EnvContextMaxChars caps the [CONTEXT] block's length.
	EnvContextMaxChars = "APTIX_CONTEXT_MAX_CHARS"
)

// Options are what a composition root chooses for the envelope; a zero
// field is read from the environment as the binary reads it.
type Options struct {
	Profiles *profiles.Set                            // nil: APTIX_PROFILES
	Contexts map[string]contracts.ConversationContext // nil: APTIX_CONVERSATION_CONTEXTS
	Budget   contextblock.Options                     // zero: APTIX_CONTEXT_MAX_CHARS
	MCP      *request.MCPOptions                      // nil: APTIX_MCP_DEFAULT_ALL, APTIX_MAX_TOOL_DEPTH, APTIX_MCP_ALLOW_URLS
}

// FromEnv builds the envelope stage with its conversations bucket; every
// composition root (the binary, the in-process stack) calls it.
func FromEnv(ctx context.Context, d pipeline.Deps, o Options) (pipeline.Stage, func(), error) {
	var err error
	if o.Profiles == nil {
		if o.Profiles, err = profiles.FromEnv(); err != nil {
			return pipeline.Stage{}, nil, err
		}
	}
	if o.Contexts == nil {
		o.Contexts = map[string]contracts.ConversationContext{}
		if f := os.Getenv(EnvContexts); f != "" {
			data, err := os.ReadFile(f)
			if err != nil {
				return pipeline.Stage{}, nil, fmt.Errorf("%s: %w", EnvContexts, err)
			}
			if err := json.Unmarshal(data, &o.Contexts); err != nil {
				return pipeline.Stage{}, nil, fmt.Errorf("%s %s: %w", EnvContexts, f, err)
			}
		}
	}
	if o.Budget == (contextblock.Options{}) {
		o.Budget.MaxChars, _ = strconv.Atoi(os.Getenv(EnvContextMaxChars))
	}
	mcp := o.MCP
	if mcp == nil {
		m, err := request.MCPOptionsFromEnv()
		if err != nil {
			return pipeline.Stage{}, nil, err
		}
		mcp = &m
	}
	convs, err := store.OpenConversations(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		return pipeline.Stage{}, nil, err
	}
	e := &Envelope{Profiles: o.Profiles, Contexts: o.Contexts, Conversations: convs, Budget: o.Budget, MCP: *mcp}
	return e.Stage(), func() {}, nil
}
