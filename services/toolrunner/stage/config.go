package stage

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline"
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

// FromEnv builds a Runner from the environment (APTIX_MCP_CONFIG,
// APTIX_TOOL_TIMEOUT) with its results bucket and the cancel records.
func FromEnv(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, log *slog.Logger) (*Runner, error) {
	cfg, err := mcp.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	timeout, err := TimeoutFromEnv()
	if err != nil {
		return nil, err
	}
	results, err := OpenResults(ctx, js, pipeline.ReplicasFromEnv())
	if err != nil {
		return nil, err
	}
	cancels, err := pipeline.OpenCancels(ctx, js, 0)
	if err != nil {
		return nil, err
	}
	reg := mcp.NewRegistry(cfg, mcp.Options{Logger: log})
	if len(cfg.Servers) == 0 {
		log.Warn("no MCP servers configured (APTIX_MCP_CONFIG): a request naming one fails with unknown_mcp_server")
	} else {
		log.Info("MCP servers configured", "servers", reg.Labels(), "tool_timeout", timeout.String())
	}
	return &Runner{Tools: reg, Results: results, Timeout: timeout, Cancels: cancels, NC: nc, Logger: log, URLTools: URLRegistries(log)}, nil
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
