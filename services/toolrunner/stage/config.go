package stage

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
)

// EnvTimeout bounds each server-side tool call (default 45s).
const EnvTimeout = "APTIX_TOOL_TIMEOUT"

// TimeoutFromEnv reads APTIX_TOOL_TIMEOUT (a Go duration: 30s, 1m, 500ms).
func TimeoutFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvTimeout)
	if v == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 45s", EnvTimeout, v)
	}
	return d, nil
}

// Options are what a composition root chooses for the toolrunner; a zero
// field is read from the environment as the binary reads it.
type Options struct {
	// Tools are the MCP servers; nil connects those of APTIX_MCP_CONFIG.
	Tools Tools
	// Timeout bounds each tool call; zero reads APTIX_TOOL_TIMEOUT (45s).
	Timeout time.Duration
}

// FromEnv builds the toolrunner stage with its results bucket and the
// cancel records; every composition root (the binary, the in-process
// stack) calls it. close stops the cancel watch and disconnects the MCP
// servers it connected.
func FromEnv(ctx context.Context, d pipeline.Deps, o Options) (pipeline.Stage, func(), error) {
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	timeout := o.Timeout
	if timeout == 0 {
		var err error
		if timeout, err = TimeoutFromEnv(); err != nil {
			return pipeline.Stage{}, nil, err
		}
	}
	tools, closeTools := o.Tools, func() {}
	if tools == nil {
		cfg, err := mcp.ConfigFromEnv()
		if err != nil {
			return pipeline.Stage{}, nil, err
		}
		reg := mcp.NewRegistry(cfg, mcp.Options{Logger: log})
		if len(cfg.Servers) == 0 {
			log.Warn("no MCP servers configured (APTIX_MCP_CONFIG): a request naming one fails with unknown_mcp_server")
		} else {
			log.Info("MCP servers configured", "servers", reg.Labels(), "tool_timeout", timeout.String())
		}
		tools, closeTools = reg, func() { _ = reg.Close() }
	}
	results, err := OpenResults(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		closeTools()
		return pipeline.Stage{}, nil, err
	}
	cancels, err := store.OpenCancels(ctx, d.JS, d.Stream.Replicas)
	if err != nil {
		closeTools()
		return pipeline.Stage{}, nil, err
	}
	r := &Runner{Tools: tools, Results: results, Timeout: timeout, Cancels: cancels, NC: d.NC, Logger: log, URLTools: URLRegistries(log)}
	return r.Stage(), func() { cancels.Close(); closeTools() }, nil
}

// maxURLRegistries bounds the client-named servers kept connected.
const maxURLRegistries = 32

// URLRegistries connects to client-named servers (server_url), one
// registry per label and URL, kept for the process's life. Only URLs the
// envelope allowed (APTIX_MCP_ALLOW_URLS) reach it.
func URLRegistries(log *slog.Logger) func(label, url string) Tools {
	var mu sync.Mutex
	regs := map[string]*mcp.Registry{}
	return func(label, url string) Tools {
		mu.Lock()
		defer mu.Unlock()
		key := label + "\x00" + url
		if r, ok := regs[key]; ok {
			return r
		}
		if len(regs) >= maxURLRegistries {
			// Clients choose these: bounded, one connection closed to make room.
			for k, old := range regs {
				_ = old.Close()
				delete(regs, k)
				break
			}
		}
		r := mcp.NewRegistry(mcp.Config{Servers: map[string]mcp.ServerConfig{label: {Type: mcp.TypeHTTP, URL: url}}}, mcp.Options{Logger: log})
		regs[key] = r
		return r
	}
}
