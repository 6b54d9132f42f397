// Package application is the gateway's application: every operation a
// client can ask of the gateway (create and continue a response, get,
// cancel and delete it, follow or resume its stream, its input items,
// compact, count input tokens, the conversation objects, usage), the
// conversation heads those operations move, and what runs beside them
// (the shared completion watch, the background deadlines, the webhooks).
//
// It owns the bus side of the gateway: the response bucket, the turn and
// delta streams, the cancel and usage stores. The front doors (package
// httpapi for the Responses API over HTTP and WebSocket, Chat
// Completions, Messages and execute) decode a request,
// call an operation here with the authenticated principal and encode
// what it returns: the operations take a context, the principal and a
// typed request, and return typed values and *responses.Error, which
// each door says in its own wire shape. Nothing here reads an HTTP
// request or writes an HTTP answer; HTTP goes out from here only to
// deliver webhooks and to forward a request to a backend's own endpoint
// (docs/architecture.md#the-gateway).
package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/sealbox"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Config configures the application. Zero values take the defaults.
type Config struct {
	NC       *nats.Conn
	Profiles *profiles.Set
	// MaxBodyBytes bounds a request body (413 beyond it); default: half the
	// server's max payload, since the turn event carries the request.
	MaxBodyBytes int64
	// SyncTimeout bounds how long a synchronous create waits for its turn
	// (504 beyond it; the turn still completes and GET returns it). Default 10m.
	SyncTimeout time.Duration
	// SubmitTimeout bounds the publish of a turn (503 beyond it). Default 5s.
	SubmitTimeout time.Duration
	// Replicas of the KV bucket (1, or 3 in a cluster).
	Replicas int
	// RotateCompletions is how often the shared completion watch is
	// replaced, which bounds what it keeps (completions.go). Default 5m.
	RotateCompletions time.Duration
	Logger            *slog.Logger
	// BackgroundTimeout fails a background response still running after it
	// (code timeout). Default DefaultBackgroundTimeout.
	BackgroundTimeout time.Duration
	// Webhooks, when set, delivers the webhooks of terminal responses
	// (webhook.go); nil sends none.
	Webhooks *WebhookConfig
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// CompactionKeys seals the compaction items the gateway makes and
	// opens the ones clients send back (CompactionKeysFromEnv). Default: a
	// random key of this process, whose items no restart or other replica
	// can open.
	CompactionKeys *sealbox.Keyring
	// LimitBackground bounds each principal's background responses queued
	// or running (0: no limit), across replicas.
	LimitBackground int
	// Stream is the deployment's stream limits (layout.StreamConfigFromEnv):
	// a turn that enters past the queue (entry.go) is admitted at the mark
	// the first stage admits at. Zero values take the defaults.
	Stream layout.StreamConfig
	// MCPDefaultAll is the envelope's APTIX_MCP_DEFAULT_ALL
	// (ConfigFromEnv reads it as the envelope does): set, every turn
	// visits the envelope, which offers a turn with no tools every MCP
	// server; unset, a transparent turn that needs nothing of it skips it
	// (entry.go).
	MCPDefaultAll bool
}

// App is the gateway application on one NATS connection.
type App struct {
	cfg    Config
	js     jetstream.JetStream
	store  *Store
	comps  *completions
	stream jetstream.Stream
	// queue is the admission queue, where a turn's request waits for the
	// retriever (record.go reads a queued turn's record there); nil when
	// it did not exist at start.
	queue jetstream.Stream
	// putHook, when set, writes response records in place of the store
	// (tests that make the write fail or wait).
	putHook func(context.Context, responses.Meta) error
	// deltas is the stream of stored deltas (resume.go).
	deltas jetstream.Stream
	// cancels holds the turn cancellations (store.CancelBucket).
	cancels *store.Cancels
	hooks   *webhooks
	dl      jetstream.ConsumeContext
	// hop is this deployment's mark (pipeline.DeploymentMark): a request
	// carrying it comes from this deployment's own LLM caller.
	hop string
	log *slog.Logger
	// usage is the shared accounting: budgets and the usage report (usage.go).
	usage *store.Usage
	// entrance submits turns at their entry point (entry.go).
	entrance *pipeline.Entrance
}

// withDefaults fills cfg's zero values.
func withDefaults(cfg Config) Config {
	if cfg.MaxBodyBytes <= 0 && cfg.NC != nil {
		cfg.MaxBodyBytes = max(cfg.NC.MaxPayload()/2, 64<<10)
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = 10 * time.Minute
	}
	if cfg.SubmitTimeout <= 0 {
		cfg.SubmitTimeout = 5 * time.Second
	}
	if cfg.RotateCompletions <= 0 {
		cfg.RotateCompletions = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BackgroundTimeout <= 0 {
		cfg.BackgroundTimeout = DefaultBackgroundTimeout
	}
	if cfg.CompactionKeys == nil {
		cfg.CompactionKeys = sealbox.Random()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// New connects the application to the bus: the KV bucket, the streams,
// one completion watch shared by every request of this process, the
// deadline consumer and (with cfg.Webhooks) the webhook consumer. The
// turn stream must exist (the stages create it).
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.NC == nil || cfg.Profiles == nil {
		return nil, errors.New("gateway: NC and Profiles are required")
	}
	cfg = withDefaults(cfg)
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	a := &App{cfg: cfg, js: js, log: cfg.Logger}
	if a.stream, err = js.Stream(ctx, contracts.StreamName); err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	a.hop = pipeline.MarkOf(a.stream.CachedInfo())
	if q, err := js.Stream(ctx, contracts.QueueStreamName); err == nil {
		a.queue = q
	}
	if a.entrance, err = pipeline.NewEntrance(cfg.NC, cfg.Stream, "gateway",
		pipeline.Skipping{Profiles: cfg.Profiles, MCPDefaultAll: cfg.MCPDefaultAll}); err != nil {
		return nil, err
	}
	if a.store, err = OpenStore(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if a.deltas, err = ensureDeltaStream(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if a.cancels, err = store.OpenCancels(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	if a.usage, err = store.OpenUsage(ctx, js, cfg.Replicas); err != nil {
		return nil, err
	}
	// One ordered consumer for the whole process, not one per request.
	if a.comps, err = newCompletions(ctx, js, cfg.RotateCompletions); err != nil {
		return nil, err
	}
	if a.dl, err = a.startDeadlines(ctx); err != nil {
		return nil, err
	}
	if cfg.Webhooks != nil {
		if a.hooks, err = a.startWebhooks(ctx, *cfg.Webhooks); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Close stops the completion watch, which ends every operation still
// waiting for a completion, the webhook and deadline consumers and the
// cancel watch.
func (a *App) Close() {
	if a.hooks != nil {
		a.hooks.stop()
	}
	a.dl.Stop()
	a.comps.stop()
	a.cancels.Close()
}

// Config is the application's configuration, defaults filled in.
func (a *App) Config() Config { return a.cfg }

// Mark is this deployment's mark (contracts.HeaderHop): a request that
// carries it comes from this deployment's own LLM caller.
func (a *App) Mark() string { return a.hop }

// Ready reports whether the bus answers: the connection is up and the
// turn stream reachable.
func (a *App) Ready(ctx context.Context) *responses.Error {
	if st := a.cfg.NC.Status(); st != nats.CONNECTED {
		return responses.Unavailable("NATS is " + st.String())
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := a.stream.Info(ctx); err != nil {
		return responses.Unavailable("stream " + contracts.StreamName + " unreachable: " + err.Error())
	}
	return nil
}

// LookupResponse resolves a resp_… id for the console (any owner's: the
// console is for admins). The console reads the stream and the stores
// itself otherwise: it is the operator's view of the bus.
func (a *App) LookupResponse(ctx context.Context, id string) (conv, turn string, found bool, err error) {
	meta, err := a.lookup(ctx, id)
	if err != nil || meta == nil {
		return "", "", false, err
	}
	return meta.ConversationID, meta.TurnID, true, nil
}

// jsonCodec encodes as encoding/json does, with the v2 engine (the
// pipeline's own codec for turns).
var jsonCodec = jsonv1.DefaultOptionsV1()

// BusError classifies a failed bus operation: a full admission queue or a
// bus that is down is a 503 the client may retry; anything else a 500.
func (a *App) BusError(err error) *responses.Error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		// The turn event (the request plus what the stages add) is over what
		// NATS carries: the body was too large after all.
		return responses.TooLarge(a.cfg.MaxBodyBytes)
	case backpressure.IsAtCapacity(err):
		return responses.Unavailable("Aptix is at capacity (the turn queue is full); retry later.")
	case errors.Is(err, client.ErrTurnIDReused):
		// The client's mistake, not the server's: the turn id names another
		// request of this conversation, whose answer stands.
		e := responses.BadRequest("turnId", contracts.CodeTurnIDReused, err.Error())
		e.Status = statusConflict
		return e
	case a.cfg.NC.Status() != nats.CONNECTED, errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrConnectionClosed):
		return responses.Unavailable("The Aptix bus is unavailable; retry later.")
	}
	return responses.Internal("submit_failed", err.Error())
}

// The statuses of the errors the operations return (responses.Error says
// its HTTP status; every door maps it to its own wire shape).
const (
	statusForbidden       = 403
	statusConflict        = 409
	statusTooManyRequests = 429
	statusInternal        = 500
	statusGatewayTimeout  = 504
)

// turnAt reads the most advanced stored event of a turn: the completed one
// when there is one, else the latest stage reached (for the status of a
// response still running, and for its input items).
//
// A stage whose read fails for another reason than "no message" is skipped
// (the requested events may live in an admission stream of their own); the
// error is returned only when no event could be read at all.
func (a *App) turnAt(ctx context.Context, conv, turn string) (stage string, t *contracts.Turn, at time.Time, err error) {
	var firstErr error
	for i := len(contracts.Stages) - 1; i >= 0; i-- {
		st := contracts.Stages[i]
		m, err := a.stream.GetLastMsgForSubject(ctx, contracts.Subject(st, conv, turn))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("read %s event of %s: %w", st, turn, err)
			}
			continue
		}
		data, err := claim.EventData(ctx, a.js, m.Header, m.Data)
		if err != nil {
			return "", nil, at, err
		}
		var doc contracts.Turn
		if err := json.Unmarshal(data, &doc); err != nil {
			return "", nil, at, fmt.Errorf("decode %s event of %s: %w", st, turn, err)
		}
		return st, &doc, m.Time, nil
	}
	return "", nil, at, firstErr
}

func ptr(s string) *string { return &s }
