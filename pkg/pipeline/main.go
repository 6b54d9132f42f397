package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// Env names every stage binary reads.
const (
	EnvNATSURL   = "APTIX_NATS_URL"
	EnvNATSCreds = "APTIX_NATS_CREDS"
	// EnvNATSNkey is the path of the service's nkey seed file (make nkeys
	// writes one per service into deploy/nats/nkeys).
	EnvNATSNkey      = "APTIX_NATS_NKEY"
	EnvMaxAckPending = "APTIX_MAX_ACK_PENDING"
	EnvMaxDeliver    = "APTIX_MAX_DELIVER"
	EnvAckWait       = "APTIX_ACK_WAIT"
	EnvLogLevel      = "APTIX_LOG_LEVEL"
)

// Deps is what every composition root (a stage binary through Main, the
// in-process stack of `aptix up` and the tests) hands a service's
// constructor: the connection, the logger and the limits it read. The
// constructor reads the rest of its configuration from the environment.
type Deps struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	Log *slog.Logger
	// Stream are the limits the process applies; Stream.Replicas sizes the
	// buckets a stage creates, as the streams are sized.
	Stream layout.StreamConfig
}

// Build makes a stage once the connection is up (stages open their KV
// buckets and indexes with it). close, when not nil, releases what the
// build started (background folds, watches, indexes); it runs once the
// stage has stopped.
type Build func(ctx context.Context, d Deps) (st Stage, close func(), err error)

// Main is the whole main function of a stage binary: configuration from the
// environment, JSON logs, telemetry, a NATS connection that reconnects
// forever, and a graceful drain on SIGINT/SIGTERM. It exits the process.
func Main(service string, build Build) {
	log := NewLogger(os.Stderr).With("service", service)
	if err := runMain(service, build, log); err != nil {
		log.Error("stage failed", "err", err)
		os.Exit(1)
	}
}

// NewLogger is the JSON slog logger every Aptix process uses (level from APTIX_LOG_LEVEL).
func NewLogger(w *os.File) *slog.Logger {
	level, _, _ := ParseLogLevel(os.Getenv(EnvLogLevel))
	return NewLoggerAt(w, level)
}

// NewLoggerAt is NewLogger at a given level (a *slog.LevelVar lets the
// process change it while it runs).
func NewLoggerAt(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// ParseLogLevel reads a level name (debug, info, warn, error, or a slog
// offset such as warn+2); set says whether one was given. "" is info.
func ParseLogLevel(s string) (level slog.Level, set bool, err error) {
	if s == "" {
		return slog.LevelInfo, false, nil
	}
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo, false, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return level, true, nil
}

func runMain(service string, build Build, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTelemetry, err := StartTelemetry(ctx, "aptix-"+service)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	url := os.Getenv(EnvNATSURL)
	if url == "" {
		url = nats.DefaultURL
	}
	opts := []nats.Option{nats.Name("aptix-" + service), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true)}
	auth, err := AuthOptions(os.Getenv(EnvNATSCreds), os.Getenv(EnvNATSNkey))
	if err != nil {
		return err
	}
	opts = append(opts, auth...)
	streams, subs, err := LimitsFromEnv()
	if err != nil {
		return err
	}
	log.Info("starting", "nats", url)
	// A connection nats.go closes for good (a protocol error) is replaced,
	// and the stage rebuilt on the new one, instead of the process exiting.
	return Supervise(ctx, log, func(context.Context) (*nats.Conn, error) {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", url, err)
		}
		return nc, nil
	}, func(ctx context.Context, nc *nats.Conn) error {
		return buildAndRun(ctx, nc, build, streams, subs, log)
	})
}

// buildAndRun builds the stage on nc and runs it until ctx ends.
func buildAndRun(ctx context.Context, nc *nats.Conn, build Build, streams layout.StreamConfig, subs SubscriberConfig, log *slog.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// A stage often starts before JetStream can serve it (a cluster still
	// electing its meta leader, a server still starting): building it
	// (buckets, indexes) is retried for a while instead of exiting at once.
	var st Stage
	var closeStage func()
	err = retryStartup(ctx, log, "build stage", func() error {
		var err error
		st, closeStage, err = build(ctx, Deps{NC: nc, JS: js, Log: log, Stream: streams})
		return err
	})
	if err != nil {
		return err
	}
	if closeStage != nil {
		defer closeStage()
	}
	// The stage where turns end keeps history within its limits (its NATS
	// user is the one allowed to purge APTIX in deploy/nats/auth.conf).
	o := Options{Logger: log, Stream: streams, Trim: layout.Trims(st.Name), Subscriber: subs}
	started := time.Now()
	for {
		err := Run(ctx, nc, st, o)
		if err == nil || ctx.Err() != nil || time.Since(started) > startupWindow {
			return err
		}
		// Run failed before consuming (stream or consumer not creatable yet).
		log.Warn("stage could not start, retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// startupWindow bounds how long a stage keeps retrying its start before it
// exits with the error: long enough for a cluster to elect a leader, short
// enough that a real misconfiguration is not hidden.
const startupWindow = 2 * time.Minute

func retryStartup(ctx context.Context, log *slog.Logger, what string, f func() error) error {
	deadline := time.Now().Add(startupWindow)
	wait := 250 * time.Millisecond
	for {
		err := f()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		log.Warn(what+" failed, retrying", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// LimitsFromEnv is the one reading of the stream limits (StreamConfigFromEnv)
// and consumer settings (APTIX_MAX_ACK_PENDING, APTIX_MAX_DELIVER,
// APTIX_ACK_WAIT) that every Aptix process running stages applies: the stage
// binaries, `aptix up` and the in-process stack.
func LimitsFromEnv() (layout.StreamConfig, SubscriberConfig, error) {
	streams, err := layout.StreamConfigFromEnv()
	subs := SubscriberConfig{MaxAckPending: layout.IntFromEnv(EnvMaxAckPending), MaxDeliver: layout.IntFromEnv(EnvMaxDeliver), AckWait: envDuration(EnvAckWait)}
	return streams, subs, err
}

func envDuration(key string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(key))
	return d
}

// AuthOptions are the NATS options for a credentials file (a user JWT and
// seed) and/or an nkey seed file; either may be empty. A URL's
// user:password needs neither.
func AuthOptions(creds, nkeySeed string) ([]nats.Option, error) {
	var opts []nats.Option
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if nkeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(nkeySeed)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", EnvNATSNkey, nkeySeed, err)
		}
		opts = append(opts, o)
	}
	return opts, nil
}
