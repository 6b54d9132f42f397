package application

import (
	"context"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// enter submits a prepared turn at the entry point it needs
// (pipeline.Entrance, docs/architecture.md#entry-points): a turn with no
// retrieval (every transparent one) skips the retriever while APTIX has
// room, any other on aptix.requested as before. Every operation submits
// through here.
func (a *App) enter(ctx context.Context, exec contracts.AgentExecuteRequest) error {
	_, err := a.entrance.Submit(ctx, exec)
	return err
}
