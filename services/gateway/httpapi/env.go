package httpapi

import "github.com/aptix-dev/aptix/services/gateway/application"

// ConfigFromEnv fills what every gateway reads from its environment: the
// application's settings (application.ConfigFromEnv: replicas, body and
// sync limits, background timeout, webhooks, compaction keys) and the
// HTTP door's (WebSocketConfigFromEnv). The gateway binary and aptix up
// both call it (through app.FromEnv), so the two cannot read different
// settings.
func ConfigFromEnv(cfg *Config) error {
	if err := application.ConfigFromEnv(&cfg.Config); err != nil {
		return err
	}
	return WebSocketConfigFromEnv(cfg)
}
