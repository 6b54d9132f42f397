package application

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// enter submits a prepared turn at the entry point it needs
// (pipeline.Entrance, docs/architecture.md#entry-points): a turn with no
// retrieval (every transparent one) skips the retriever while APTIX has
// room, and a transparent one that starts its conversation with nothing
// the envelope adds (no tools, no context) skips the envelope too; any
// other goes on aptix.requested as before. Every operation submits through
// here.
func (a *App) enter(ctx context.Context, exec contracts.AgentExecuteRequest) error {
	_, err := a.entrance.Submit(ctx, exec)
	return err
}
