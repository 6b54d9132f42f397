package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

var (
	// ErrUnknownServer is returned for a label that is not an enabled server
	// of the Registry's Config.
	ErrUnknownServer = errors.New("mcp: unknown server")
	// ErrClosed is returned after Registry.Close.
	ErrClosed = errors.New("mcp: registry closed")
)

// Tool is one tool of one MCP server, as tools/list described it.
type Tool struct {
	Server      string // the server label
	Name        string // the tool's name on its server
	Description string
	// InputSchema is a JSON Schema object ({"type":"object",...}), never empty:
	// function-calling APIs reject a tool without one.
	InputSchema json.RawMessage
}

// ServerTools is the outcome of listing one server's tools.
type ServerTools struct {
	Server string
	Tools  []Tool
	// Err is set when the server is down, unreachable or failed listing: it is
	// reported so the turn can go on with the other servers' tools.
	Err error
}

// Options tune a Registry; the zero value is usable.
type Options struct {
	// TTL is how long a server's tools/list result is reused (default 5m);
	// notifications/tools/list_changed drops it earlier.
	TTL time.Duration
	// ConnectTimeout bounds connecting and the MCP handshake (default 10s).
	ConnectTimeout time.Duration
	// Logger receives connection events and stdio servers' stderr (default slog.Default()).
	Logger *slog.Logger
	// ClientName and ClientVersion identify Aptix to servers (default "aptix", "0.1.0").
	ClientName, ClientVersion string
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 5 * time.Minute
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ClientName == "" {
		o.ClientName = "aptix"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "0.1.0"
	}
	return o
}

// Registry holds one lazily opened session per configured MCP server. It is
// safe for concurrent use: a turn lists tools while other turns call them.
type Registry struct {
	servers map[string]*server
	labels  []string

	mu     sync.Mutex
	closed bool
}

// NewRegistry prepares a session for every enabled server of cfg; nothing is
// connected until List or Call needs a server, so a server that is down at
// start costs nothing until it is used.
func NewRegistry(cfg Config, o Options) *Registry {
	o = o.withDefaults()
	r := &Registry{servers: make(map[string]*server)}
	for label, sc := range cfg.Servers {
		if sc.Disabled {
			continue
		}
		r.servers[label] = newServer(label, sc, o)
		r.labels = append(r.labels, label)
	}
	sort.Strings(r.labels)
	return r
}

// Labels returns the sorted labels of the enabled servers.
func (r *Registry) Labels() []string { return append([]string(nil), r.labels...) }

// Has reports whether label is an enabled server.
func (r *Registry) Has(label string) bool {
	_, ok := r.servers[label]
	return ok
}

// List returns the tools of the given servers, in the order of labels. Servers
// are asked in parallel and their lists are cached; a server that fails is
// reported in its ServerTools.Err and is tried again on the next List.
func (r *Registry) List(ctx context.Context, labels []string) []ServerTools {
	out := make([]ServerTools, len(labels))
	var wg sync.WaitGroup
	for i, label := range labels {
		out[i].Server = label
		s, err := r.server(label)
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Go(func() { out[i].Tools, out[i].Err = s.listTools(ctx) })
	}
	wg.Wait()
	return out
}

// Close closes every session and stops stdio subprocesses (closing their
// stdin, then SIGTERM, then SIGKILL, 2s apart), and aborts connects in
// progress. Later List and Call calls fail with ErrClosed. It returns only
// failures to stop a subprocess: an HTTP server that is already gone is not
// one.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	errs := make([]error, len(r.labels))
	var wg sync.WaitGroup
	for i, label := range r.labels {
		wg.Go(func() { errs[i] = r.servers[label].close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Registry) server(label string) (*server, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s, ok := r.servers[label]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownServer, label)
	}
	return s, nil
}
