package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// server is one configured MCP server: its session (opened on first use and
// reopened after it breaks) and its cached tool list.
type server struct {
	label  string
	cfg    ServerConfig
	opts   Options
	log    *slog.Logger
	client *sdk.Client
	base   context.Context    // parent of every connect; cancelled by close
	stop   context.CancelFunc // cancels base

	mu      sync.Mutex
	cs      *sdk.ClientSession
	cmd     *exec.Cmd // the stdio child of cs, if any
	dial    *dialing  // the connect in progress, shared by concurrent callers
	closed  bool
	closing sync.WaitGroup // dropped sessions being closed in the background

	tools   []Tool
	toolsAt time.Time
	gen     uint64        // bumped by list_changed: a listing begun before it is not cached
	listing chan struct{} // one tools/list at a time (a 1-slot semaphore)
}

type dialing struct {
	done chan struct{}
	cs   *sdk.ClientSession
	err  error
}

func newServer(label string, sc ServerConfig, o Options) *server {
	s := &server{label: label, cfg: sc, opts: o, log: o.Logger.With("mcp_server", label), listing: make(chan struct{}, 1)}
	s.base, s.stop = context.WithCancel(context.Background())
	s.client = sdk.NewClient(&sdk.Implementation{Name: o.ClientName, Version: o.ClientVersion}, &sdk.ClientOptions{
		// No roots, sampling or elicitation: Aptix only lists and calls tools.
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.invalidate() },
	})
	return s
}

// session returns the open session, connecting if there is none. Concurrent
// callers share one connect; each waits only as long as its own ctx allows,
// while the connect itself is bounded by ConnectTimeout (and Close).
func (s *server) session(ctx context.Context) (*sdk.ClientSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.cs != nil {
		cs := s.cs
		s.mu.Unlock()
		return cs, nil
	}
	d := s.dial
	if d == nil {
		d = &dialing{done: make(chan struct{})}
		s.dial = d
		go s.connect(d)
	}
	s.mu.Unlock()
	select {
	case <-d.done:
		return d.cs, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("connect: %w", ctx.Err())
	}
}

func (s *server) connect(d *dialing) {
	cs, cmd, err := s.open(s.base)
	s.mu.Lock()
	s.dial = nil
	closed := s.closed
	if err == nil && !closed {
		s.cs, s.cmd = cs, cmd
		s.tools = nil // a new session may be a new server version
		s.gen++
		go s.watch(cs)
	}
	s.mu.Unlock()
	if closed {
		if err == nil {
			_ = cs.Close() // close() waits for this dial, so no child outlives it
		}
		cs, err = nil, ErrClosed
	}
	d.cs, d.err = cs, err
	close(d.done)
	switch {
	case err == nil:
		s.log.Info("mcp server connected", "type", s.cfg.Type)
	case !closed:
		s.log.Warn("mcp server unreachable", "error", err)
	}
}

func (s *server) open(ctx context.Context) (*sdk.ClientSession, *exec.Cmd, error) {
	t, cmd, err := newTransport(s.label, s.cfg, s.log)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			// A child that failed the handshake must not linger. Its pipes'
			// closing (now or already) reaps it.
			_ = cmd.Process.Kill()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("connect: timed out after %s", s.opts.ConnectTimeout)
		}
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return cs, cmd, nil
}

// watch forgets a session once its connection ends (a stdio child that exited,
// an HTTP session the server dropped), so the next call reconnects at once.
func (s *server) watch(cs *sdk.ClientSession) {
	_ = cs.Wait()
	s.mu.Lock()
	mine := s.cs == cs
	if mine {
		s.cs, s.cmd = nil, nil
	}
	closed := s.closed
	s.mu.Unlock()
	if mine && !closed {
		s.log.Warn("mcp session ended; reconnecting on next use")
	}
}

// drop forgets a session that failed a request and closes it in the
// background (a stdio child may take a while to exit); the next request opens
// a new one. close() waits for these background closes.
func (s *server) drop(cs *sdk.ClientSession) {
	s.mu.Lock()
	if s.cs == cs {
		s.cs, s.cmd = nil, nil
	}
	closed := s.closed
	if !closed {
		s.closing.Add(1) // under mu and before closed: happens before close()'s Wait
	}
	s.mu.Unlock()
	if closed {
		_ = cs.Close()
		return
	}
	go func() {
		defer s.closing.Done()
		_ = cs.Close()
	}()
}

// invalidate drops the cached tool list (notifications/tools/list_changed).
func (s *server) invalidate() {
	s.mu.Lock()
	s.tools = nil
	s.gen++
	s.mu.Unlock()
	s.log.Debug("mcp tools changed")
}

func (s *server) close() error {
	s.stop() // abort a connect in progress
	s.mu.Lock()
	s.closed = true
	cs, d := s.cs, s.dial
	s.cs, s.cmd = nil, nil
	s.mu.Unlock()
	var err error
	if cs != nil {
		err = s.closeErr(cs.Close())
	}
	if d != nil {
		<-d.done // the dial closes what it opened
	}
	s.closing.Wait()
	return err
}

// closeErr keeps only the close failures a caller can act on: a stdio child
// that could not be stopped. An HTTP server that is already gone cannot take
// its DELETE, and a child that needed SIGTERM reports that as its exit
// status; both are logged, since the session is closed either way.
func (s *server) closeErr(err error) error {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case s.cfg.Type == TypeStdio && !errors.As(err, &exit):
		return fmt.Errorf("mcp server %q: close: %w", s.label, err)
	}
	s.log.Debug("mcp session closed with an error", "error", err)
	return nil
}
