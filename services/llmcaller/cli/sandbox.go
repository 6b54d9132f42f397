// Package cli holds the llmcaller's cobra commands; the aptix root command
// wires them in.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/sealbox"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox/reply"
)

// EnvSandboxCompactionKeys are the keys the sandbox seals its compaction
// items with (comma-separated base64, the first seals); unset, a random key
// of the process, so its items do not open after a restart.
const EnvSandboxCompactionKeys = "APTIX_SANDBOX_COMPACTION_KEYS"

// SandboxCommand returns `sandbox`: it serves the sandbox Responses API
// (a deterministic stand-in, NOT a model) until interrupted.
func SandboxCommand() *cobra.Command {
	var (
		addr       string
		latency    time.Duration
		scriptPath string
		failFirst  int
		failStatus int
		faults     string
	)
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Serve the sandbox /v1/responses endpoint (deterministic, NOT a model)",
		Long: "Serve an OpenAI-compatible /v1/responses endpoint that answers deterministically from what it\n" +
			"receives, in the shape a model would (a text, a function call, JSON of the requested schema),\n" +
			"for tests, demos and benchmarks. It is a sandbox, not a model: every response says \"sandbox\": true\n" +
			"and carries the x-aptix-sandbox header. Streams end with data: [DONE].\n\n" +
			reply.Rules + "\n\n" +
			"Faults: per request with the X-Sandbox-Fault header (latency=D, 429, 500, status=N, detail=N,\n" +
			"malformed, drop, stream-error, retry-after=S, retry-after-ms=MS) or for every request with --faults.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := sandbox.Options{Latency: latency, FailFirst: failFirst, FailStatus: failStatus, Faults: faults,
				Logger: slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))}
			if scriptPath != "" {
				script, err := readScript(scriptPath)
				if err != nil {
					return err
				}
				o.Script = script
			}
			if v := os.Getenv(EnvSandboxCompactionKeys); v != "" {
				keys, err := sealbox.Parse(v)
				if err != nil {
					return fmt.Errorf("sandbox: %s: %w", EnvSandboxCompactionKeys, err)
				}
				o.CompactionKeys = keys
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("sandbox: listen on %s: %w", addr, err)
			}
			srv := &http.Server{Handler: sandbox.New(o), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "aptix sandbox (NOT a model) listening on http://%s/v1\n", ln.Addr())

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("sandbox: serve: %w", err)
			case <-ctx.Done():
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("sandbox: shutdown: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8089", "listen address HOST:PORT")
	f.DurationVar(&latency, "latency", 0, "delay before every answer, e.g. 200ms")
	f.StringVar(&scriptPath, "script", "", "JSON file: an array of raw output texts returned in order")
	f.IntVar(&failFirst, "fail-first", 0, "fail the first N requests")
	f.IntVar(&failStatus, "fail-status", http.StatusInternalServerError, "HTTP status of the --fail-first failures")
	f.StringVar(&faults, "faults", "", "fault spec applied to every request without an X-Sandbox-Fault header")
	return cmd
}

// readScript loads a JSON array of strings.
func readScript(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sandbox: read script: %w", err)
	}
	var script []string
	if err := json.Unmarshal(b, &script); err != nil {
		return nil, fmt.Errorf("sandbox: script %s must be a JSON array of strings: %w", path, err)
	}
	return script, nil
}
