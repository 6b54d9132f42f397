package application

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// ConfigFromEnv fills what the application reads from its environment:
// the bucket replicas (APTIX_STREAM_REPLICAS), APTIX_HTTP_MAX_BODY,
// APTIX_SYNC_TIMEOUT, APTIX_BACKGROUND_TIMEOUT, the stream limits
// (layout.StreamConfigFromEnv), the webhooks, APTIX_COMPACTION_KEYS and
// the envelope's APTIX_MCP_DEFAULT_ALL (pipeline.SkippingFromEnv).
func ConfigFromEnv(cfg *Config) error {
	cfg.Replicas, _ = strconv.Atoi(os.Getenv(layout.EnvReplicas))
	cfg.MCPDefaultAll = pipeline.SkippingFromEnv(nil).MCPDefaultAll
	if v := os.Getenv("APTIX_HTTP_MAX_BODY"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("APTIX_HTTP_MAX_BODY %q: %w", v, err)
		}
		cfg.MaxBodyBytes = n
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"APTIX_SYNC_TIMEOUT", &cfg.SyncTimeout}, {"APTIX_BACKGROUND_TIMEOUT", &cfg.BackgroundTimeout}} {
		if v := os.Getenv(d.key); v != "" {
			n, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s %q: %w", d.key, v, err)
			}
			*d.dst = n
		}
	}
	var err error
	if cfg.Stream, err = layout.StreamConfigFromEnv(); err != nil {
		return err
	}
	if cfg.Webhooks, err = WebhookConfigFromEnv(); err != nil {
		return err
	}
	if cfg.CompactionKeys, err = CompactionKeysFromEnv(); err != nil {
		return err
	}
	return nil
}
