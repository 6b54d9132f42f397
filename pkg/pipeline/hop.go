package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// DeploymentMark names one Aptix deployment: every process on the same
// APTIX stream (every stage binary, every gateway replica, `aptix up`)
// derives the same mark from the stream's creation time, and another
// deployment a different one. When the stream cannot be read, the mark is
// this process's own, which still catches a loop within `aptix up`.
func DeploymentMark(ctx context.Context, js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return processMark
	}
	return MarkOf(s.CachedInfo())
}

// MarkOf is the deployment mark of a stream's info.
func MarkOf(info *jetstream.StreamInfo) string {
	if info == nil {
		return processMark
	}
	sum := sha256.Sum256([]byte(info.Config.Name + "@" + info.Created.UTC().Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:8])
}

var processMark = "p" + strings.ToLower(nuid.Next())
