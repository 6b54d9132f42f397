package httpapi

import (
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("APTIX_STREAM_REPLICAS", "3")
	t.Setenv("APTIX_HTTP_MAX_BODY", "2048")
	t.Setenv("APTIX_SYNC_TIMEOUT", "45s")
	t.Setenv("APTIX_BACKGROUND_TIMEOUT", "2h")
	var cfg Config
	if err := ConfigFromEnv(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Replicas != 3 || cfg.MaxBodyBytes != 2048 || cfg.SyncTimeout != 45*time.Second || cfg.BackgroundTimeout != 2*time.Hour || cfg.Webhooks == nil {
		t.Fatalf("config: replicas %d, body %d, sync %s, background %s, webhooks %v", cfg.Replicas, cfg.MaxBodyBytes, cfg.SyncTimeout, cfg.BackgroundTimeout, cfg.Webhooks)
	}
	for key, bad := range map[string]string{"APTIX_HTTP_MAX_BODY": "lots", "APTIX_SYNC_TIMEOUT": "soon"} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, bad)
			if err := ConfigFromEnv(&Config{}); err == nil {
				t.Fatalf("%s=%s accepted", key, bad)
			}
		})
	}
}
