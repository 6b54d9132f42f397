// Package app builds the gateway: one constructor from the environment
// that `aptix up`, bin/gateway, the bench and the tests all call, so no two
// of them can read different settings or wire the parts differently.
//
// What differs between them is in Options (the bus connection, the
// profiles, the listen address, where `aptix up` keeps its keys); every
// other setting comes from the environment (httpapi.ConfigFromEnv for the
// limits, webhooks and compaction keys; auth.FromEnv for who may call).
// It builds the gateway application (services/gateway/application: the
// operations, the stores, the streams, the webhooks and deadlines) and
// the front doors over it (httpapi: the Responses API over HTTP and
// WebSocket, Chat Completions, Messages, the execute endpoint, and the
// console), which is the handler it returns
// (docs/architecture.md#the-gateway).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
)

// Options are what a process running a gateway decides itself.
type Options struct {
	NC       *nats.Conn
	Profiles *profiles.Set
	// Addr is the listener's address: authentication defaults to none on
	// loopback only (auth.FromEnv).
	Addr   string
	Logger *slog.Logger
	// DataDir, when set (aptix up), keeps the compaction keys in
	// DataDir/compaction.keys when APTIX_COMPACTION_KEYS names none, so a
	// restart opens the items it sealed before.
	DataDir string
	// LocalStack is aptix up's one-machine stack: webhooks may go to
	// loopback and private addresses unless APTIX_WEBHOOK_ALLOW_PRIVATE
	// says otherwise.
	LocalStack bool
	// Edit changes the configuration once the environment has filled it
	// (a test's shorter timeouts, the bench's quiet logger).
	Edit func(*httpapi.Config)
}

// Gateway is a built gateway: the application and its front doors
// (Server, the http.Handler; its Close closes the application too).
type Gateway struct {
	*httpapi.Server
	// App is the gateway application the doors call.
	App *application.App
	// Auth says how callers are authenticated, in words for a banner.
	Auth string
}

// ConfigError is a setting of the environment that is wrong: retrying
// cannot help, unlike a bus that is not ready yet.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// FromEnv builds the gateway on o.NC from the environment.
func FromEnv(ctx context.Context, o Options) (*Gateway, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg := httpapi.Config{Config: application.Config{NC: o.NC, Profiles: o.Profiles, Logger: log}}
	if err := httpapi.ConfigFromEnv(&cfg); err != nil {
		return nil, &ConfigError{err}
	}
	if o.LocalStack && cfg.Webhooks != nil && os.Getenv("APTIX_WEBHOOK_ALLOW_PRIVATE") == "" {
		// A local development stack: webhooks to a local receiver work.
		cfg.Webhooks.AllowPrivate = true
		log.Info("webhooks may go to loopback and private addresses (local stack; APTIX_WEBHOOK_ALLOW_PRIVATE=0 refuses them)")
	}
	if cfg.CompactionKeys == nil {
		if o.DataDir == "" {
			log.Warn("no " + application.EnvCompactionKeys + ": compaction items are sealed with a random key of this process, so no restart or other replica opens them")
		} else {
			list, err := sealbox.LoadOrCreate(filepath.Join(o.DataDir, "compaction.keys"))
			if err == nil {
				cfg.CompactionKeys, err = sealbox.Parse(list)
			}
			if err != nil {
				return nil, fmt.Errorf("compaction keys: %w", err)
			}
		}
	}
	js, err := jetstream.New(o.NC)
	if err != nil {
		return nil, err
	}
	setup, err := auth.FromEnv(ctx, o.Addr, js, max(cfg.Replicas, 1), log)
	if err != nil {
		var ce auth.ConfigError
		if errors.As(err, &ce) {
			return nil, &ConfigError{err}
		}
		return nil, err
	}
	cfg.Auth, cfg.LimitRPM, cfg.LimitBackground = setup.Auth, setup.LimitRPM, setup.LimitBackground
	if o.Edit != nil {
		o.Edit(&cfg)
	}
	a, err := application.New(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	srv, err := httpapi.New(a, cfg)
	if err != nil {
		a.Close()
		return nil, err
	}
	return &Gateway{Server: srv, App: a, Auth: setup.Describe()}, nil
}
