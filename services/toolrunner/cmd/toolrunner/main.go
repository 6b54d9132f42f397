// Command toolrunner runs the server-side tool loop's stage:
// aptix.toolround → aptix.enveloped (docs/architecture.md#the-server-side-tool-loop). It lists and calls the
// MCP servers of APTIX_MCP_CONFIG (an mcpServers JSON file; secrets in its
// headers and env come from this process's environment) with each call
// bounded by APTIX_TOOL_TIMEOUT. Also APTIX_NATS_URL, APTIX_NATS_CREDS.
package main

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/toolrunner/stage"
)

func main() {
	pipeline.Main("toolrunner", func(ctx context.Context, d pipeline.Deps) (pipeline.Stage, func(), error) {
		return stage.FromEnv(ctx, d, stage.Options{})
	})
}
