package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/hostguard"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/retriever/mcpserver"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

func init() {
	var (
		addr      string
		stdio     bool
		workspace string
	)
	cmd := &cobra.Command{
		Use:   "mcp [--http ADDR | --stdio] [--workspace W]",
		Short: "Serve the code index as an MCP server (search_code, read_file_lines, list_repos)",
		Long: "mcp serves what `aptix index` stored as an MCP server, so any MCP client (an IDE, a desktop\n" +
			"assistant, a tool loop) can search the code and read indexed files. It reads the chunk store of a\n" +
			"running `aptix up` (--nats) and keeps its own local index under <data>/mcp-index; nothing is\n" +
			"read from the local disk. --http serves streamable HTTP at http://ADDR/mcp; --stdio serves one\n" +
			"client on stdin/stdout (logs go to stderr).",
		Example: `  aptix mcp --http 127.0.0.1:8091
  aptix mcp --stdio --workspace acme
  {"mcpServers": {"aptix": {"command": "aptix", "args": ["mcp", "--stdio"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stdio && cmd.Flags().Changed("http") {
				return usagef("--http and --stdio: give one transport")
			}
			if !contracts.IsToken(workspace) {
				return usagef("--workspace %q: ids are 1-128 characters of [A-Za-z0-9_-]", workspace)
			}
			if stdio {
				addr = ""
			}
			return runMCP(cmd.Context(), addr, workspace, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&addr, "http", defaultMCPHTTP, "address to serve streamable HTTP on (endpoint /mcp)")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve one client on stdin/stdout instead of HTTP")
	cmd.Flags().StringVar(&workspace, "workspace", retrieval.DefaultWorkspace, "workspace the tools use when a call names none")
	root.AddCommand(cmd)
}

// mcpMaxChars bounds the content of one search_code answer (the pipeline's
// 24000 would cut k=50 short).
const mcpMaxChars = 200_000

// runMCP serves the index on addr, or on stdin/stdout when addr is empty,
// until interrupted (or, on stdio, until the client hangs up). In stdio
// mode nothing but the protocol may reach stdout.
func runMCP(ctx context.Context, addr, workspace string, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := pipeline.NewLogger(os.Stderr).With("service", "aptix-mcp")
	// Beyond loopback the code index is guarded as `up --mcp` guards it:
	// refused unless APTIX_AUTH says who may read it.
	public := addr != "" && !auth.Loopback(addr)
	if public {
		if err := auth.Precheck(addr); err != nil {
			return usagef("--http %s: %w", addr, err)
		}
	}
	nc, err := connectRunning("mcp")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ix, closeIndex, err := openMCPIndex(ctx, js, log)
	if err != nil {
		return err
	}
	defer closeIndex()
	go func() { // searches answer "still loading" until then; say when they stop
		if err := ix.WaitSynced(ctx); err == nil {
			log.Info("local index in step with the chunk store")
		}
	}()
	src, err := mcpserver.NewSource(ctx, js, ix)
	if err != nil {
		return err
	}
	o := mcpserver.Options{Workspace: workspace, Logger: log}
	if addr == "" {
		if err := mcpserver.New(src, o).Run(ctx, drainTransport{&mcp.StdioTransport{}, mcpDrainWait}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("mcp over stdio: %w", err)
		}
		return nil
	}
	var guard func(http.Handler) http.Handler
	access := ""
	if public {
		if m, _ := auth.ParseMode(os.Getenv("APTIX_AUTH")); m.None() {
			log.Warn("APTIX_AUTH=none: the MCP endpoint beyond loopback serves the code index to anyone", "addr", addr)
		} else {
			setup, err := auth.FromEnv(ctx, addr, js, 1, log.With("component", "auth"))
			if err != nil {
				return usagef("--http %s: %w", addr, err)
			}
			guard = func(h http.Handler) http.Handler { return requireCredential(h, setup.Auth, "") }
			access = "; " + setup.Auth.Mode() + " required, as for the gateway"
		}
	}
	url, stopHTTP, err := serveMCPWith(ctx, src, o, addr, guard)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Aptix MCP server at %s (streamable HTTP; workspace %s%s).\nConfigure it in an MCP client as:\n  {\"mcpServers\": {\"aptix\": {\"url\": %q}}}\nCtrl-C stops it.\n",
		url, workspace, access, url)
	<-ctx.Done()
	stopHTTP()
	return nil
}

// openMCPIndex opens a local index following the chunk store, under
// <data>/mcp-index. `aptix up` holds <data>/index, and a second `aptix mcp`
// (stdio clients each start their own) finds mcp-index locked: that one
// builds a private index from the chunk store in a temporary directory.
func openMCPIndex(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*retrieval.Index, func(), error) {
	o := retrieval.Options{DataDir: filepath.Join(dataDir, "mcp-index"), K: mcpserver.MaxK, MaxChars: mcpMaxChars, Logger: log}
	ix, err := retrieval.Open(ctx, js, o)
	if err == nil {
		if why := ix.Rebuilt(); why != "" {
			log.Info("rebuilding the local index from the chunk store", "reason", why)
		}
		return ix, func() { ix.Close() }, nil
	}
	tmp, terr := os.MkdirTemp("", "aptix-mcp-index-")
	if terr != nil {
		return nil, nil, fmt.Errorf("open the local index: %w", err)
	}
	log.Warn("local index unavailable: using a temporary one", "dir", o.DataDir, "err", err, "tmp", tmp)
	o.DataDir = tmp
	ix, terr = retrieval.Open(ctx, js, o)
	if terr != nil {
		os.RemoveAll(tmp)
		return nil, nil, fmt.Errorf("open the local index: %w", errors.Join(err, terr))
	}
	return ix, func() {
		ix.Close()
		os.RemoveAll(tmp)
	}, nil
}

// serveMCP serves src as the MCP server `aptix up` configures as "aptix":
// streamable HTTP on addr ("127.0.0.1:0" picks a port), endpoint /mcp. stop
// (also called when ctx ends) ends open sessions and the listener.
func serveMCP(ctx context.Context, src mcpserver.Source, addr string, log *slog.Logger) (url string, stop func(), err error) {
	return serveMCPWith(ctx, src, mcpserver.Options{Logger: log}, addr, nil)
}

// mcpSessionTimeout closes sessions of clients that went away without
// saying so.
const mcpSessionTimeout = 30 * time.Minute

// serveMCPWith serves src on addr; guard (if not nil) wraps the handler
// (requireCredential).
func serveMCPWith(ctx context.Context, src mcpserver.Source, o mcpserver.Options, addr string, guard func(http.Handler) http.Handler) (string, func(), error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("cannot listen on %s for the MCP server: %w", addr, err)
	}
	srv := mcpserver.New(src, o)
	mux := http.NewServeMux()
	// The SDK's own DNS rebinding check (loopback names only) gives way to
	// hostguard's, the API's and console's rule, which also takes the
	// listen address and APTIX_ALLOWED_HOSTS.
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: o.Logger, SessionTimeout: mcpSessionTimeout, DisableLocalhostProtection: true})
	if guard != nil {
		h = guard(h)
	}
	h = hostguard.FromEnv(addr, ln.Addr().String()).Wrap(h)
	mux.Handle("/mcp", h)
	// Requests derive from base: cancelling it ends the long-lived SSE
	// streams, which a graceful Shutdown would otherwise wait for.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("MCP server stopped", "err", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			sctx, done := context.WithTimeout(context.Background(), 5*time.Second)
			defer done()
			if err := hs.Shutdown(sctx); err != nil {
				hs.Close()
			}
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-base.Done():
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://" + net.JoinHostPort(clientHost(host), port) + "/mcp", stop, nil
}
