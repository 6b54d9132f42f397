// Command gateway serves OpenAI's Responses API over the Aptix pipeline
// (docs/http-api.md). It is stateless: run any number of replicas behind a load
// balancer; every response record is in JetStream.
//
// Environment: APTIX_HTTP_ADDR (default :8080), APTIX_NATS_URL,
// APTIX_NATS_CREDS, APTIX_NATS_NKEY (an nkey seed file), APTIX_PROFILES (the backend profiles, as the envelope and
// LLM caller read them: `model` picks one), APTIX_STREAM_REPLICAS (of the KV
// bucket), APTIX_HTTP_MAX_BODY (bytes), APTIX_SYNC_TIMEOUT (a Go duration),
// APTIX_LOG_LEVEL and the standard OTEL_* variables; authentication and
// limits: APTIX_AUTH (none | keys | jwt | keys,jwt; required beyond
// loopback), APTIX_JWKS_URL, APTIX_JWT_ISSUER, APTIX_JWT_AUDIENCE,
// APTIX_JWT_PRINCIPAL_CLAIM, APTIX_JWT_LEEWAY, APTIX_LIMIT_RPM,
// APTIX_LIMIT_BACKGROUND (services/gateway/README.md, "Auth"); connection
// limits: APTIX_HTTP_BODY_TIMEOUT, APTIX_WS_MAX_AGE, APTIX_WS_PING_INTERVAL,
// APTIX_WS_WRITE_TIMEOUT (docs/operations.md). A NATS
// connection closed for good is replaced (pipeline.Supervise); meanwhile
// /readyz and the API answer 503.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/hostguard"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/app"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
)

func main() {
	log := pipeline.NewLogger(os.Stderr).With("service", "gateway")
	if err := run(log); err != nil {
		log.Error("gateway failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTelemetry, err := pipeline.StartTelemetry(ctx, "aptix-gateway")
	if err != nil {
		return err
	}
	defer stopTelemetry()
	set, err := profiles.FromEnv()
	if err != nil {
		return err
	}
	addr := envOr("APTIX_HTTP_ADDR", ":8080")
	url := envOr(pipeline.EnvNATSURL, nats.DefaultURL)
	opts := []nats.Option{nats.Name("aptix-gateway"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true)}
	natsAuth, err := pipeline.AuthOptions(os.Getenv(pipeline.EnvNATSCreds), os.Getenv(pipeline.EnvNATSNkey))
	if err != nil {
		return err
	}
	opts = append(opts, natsAuth...)

	// The body timeout is read again by app.FromEnv; the listener needs it first.
	var bodyCfg httpapi.Config
	if err := httpapi.ConfigFromEnv(&bodyCfg); err != nil {
		return err
	}

	// The listener outlives a NATS connection: until a gateway is
	// connected (at start, or again after NATS closed the connection for
	// good) /healthz answers and everything else is a 503.
	live := &httpapi.Live{BodyTimeout: bodyCfg.BodyTimeout}
	hs := httpapi.HTTPServer(live)
	hs.Addr = addr
	if m, _ := auth.ParseMode(os.Getenv("APTIX_AUTH")); m.None() {
		// No credentials to ask for: through loopback only this machine's
		// names reach it (pkg/hostguard, DNS rebinding), as with aptix up.
		hs.Handler = hostguard.FromEnv(addr).Wrap(hs.Handler)
	}
	listenErr := make(chan error, 1)
	go func() { listenErr <- hs.ListenAndServe() }()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Supervise(ctx, log, func(context.Context) (*nats.Conn, error) {
			nc, err := nats.Connect(url, opts...)
			if err != nil {
				return nil, fmt.Errorf("connect %s: %w", url, err)
			}
			return nc, nil
		}, func(ctx context.Context, nc *nats.Conn) error {
			return serve(ctx, nc, app.Options{NC: nc, Profiles: set, Addr: addr, Logger: log}, url, live, hs, log)
		})
	}()
	select {
	case err := <-listenErr:
		if errors.Is(err, http.ErrServerClosed) {
			return <-done // stopping: serve shut the server down
		}
		stop()
		<-done
		return err
	case err := <-done:
		_ = hs.Close()
		return err
	}
}

// serve runs a gateway on nc until ctx ends (stop, or nc closed under it).
func serve(ctx context.Context, nc *nats.Conn, o app.Options, url string, live *httpapi.Live, hs *http.Server, log *slog.Logger) error {
	// The stages create the stream; a gateway started first waits for it.
	var srv *app.Gateway
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 4*time.Second) {
		var err error
		srv, err = app.FromEnv(ctx, o)
		var ce *app.ConfigError
		if errors.As(err, &ce) {
			return err
		}
		if err == nil {
			break
		}
		log.Warn("gateway not ready, retrying", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	live.Set(srv.Server)
	log.Info("serving the Responses API", "addr", o.Addr, "nats", url, "auth", srv.Auth)
	<-ctx.Done()
	if !nc.IsClosed() {
		// Stopping: in-flight requests finish (their turns complete
		// regardless) before the gateway lets go of the connection.
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("HTTP shutdown", "err", err)
		}
	}
	live.Set(nil)
	srv.Close()
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
