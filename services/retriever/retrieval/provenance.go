package retrieval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// sourceKey holds, in the local index, the chunk store it was synced from.
var sourceKey = []byte("source")

// bucketSource names the chunk store a local index follows: the JetStream
// domain and the bucket's stream with its creation time. A local index is a
// cache of one bucket: one synced from another server (another `aptix up`
// data dir, a cluster that was rebuilt, a bucket deleted and created again)
// holds files this bucket never had, and the watch never deletes them,
// because it only reports changes of this bucket. The creation time is the
// same on every node of a cluster (the meta leader assigns it), so replicas
// reconnecting to another node keep their index.
func bucketSource(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (string, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return "", fmt.Errorf("chunk store status: %w", err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return "", errors.New("chunk store status: no stream info")
	}
	info := bs.StreamInfo()
	domain := ""
	if ai, err := js.AccountInfo(ctx); err == nil {
		domain = ai.Domain
	}
	return fmt.Sprintf("domain %q, stream %s created %s", domain, info.Config.Name, info.Created.UTC().Format(time.RFC3339Nano)), nil
}
