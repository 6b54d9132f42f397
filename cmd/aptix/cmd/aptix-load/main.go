// Command aptix-load is the gateway's external load generator: openai-go
// in a closed loop in a process of its own, so the CPU a server spends per
// request is read from /proc apart from the client's (`make bench-gateway`).
// It speaks only HTTP and runs `aptix sandbox` and `aptix up` of any build
// as child processes, so it compares builds: --vs runs a second binary's
// gateway interleaved with the first's in every round.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/loadgen"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "aptix-load:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	r := &cobra.Command{Use: "aptix-load", Short: "An external load generator for the Aptix HTTP gateway (POST /v1/responses, openai-go, closed loop)",
		SilenceUsage: true, SilenceErrors: true}
	r.AddCommand(runCmd(), benchCmd())
	return r
}

// runCmd is one closed-loop run against a running server.
func runCmd() *cobra.Command {
	o := loadgen.Options{}
	cmd := &cobra.Command{
		Use:   "run --url URL",
		Short: "One closed-loop run against a Responses API; prints the figures as JSON",
		Long: "run sends --warmup then --requests transparent POST /v1/responses (model and input only) from\n" +
			"--concurrency workers, each waiting for its answer before the next, and prints p50/p90/p99, the\n" +
			"rate, and the CPU per request of --pid (and --sandbox-pid) read from /proc around the timed requests.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r, err := loadgen.Run(ctx, o)
			if err != nil {
				return err
			}
			if err := writeJSON(cmd, "", r); err != nil {
				return err
			}
			return r.Err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.BaseURL, "url", "http://127.0.0.1:8080/v1", "the Responses API base URL (a gateway's or the sandbox's)")
	f.StringVar(&o.APIKey, "api-key", "unused", "bearer token sent")
	f.StringVar(&o.Model, "model", "sandbox-1", "the request's model")
	f.StringVar(&o.Input, "input", "Explain how the HTTP client reuses connections.", "the request's input text")
	f.IntVarP(&o.Concurrency, "concurrency", "c", 1, "workers in the closed loop")
	f.IntVar(&o.Warmup, "warmup", 200, "requests sent first, not timed")
	f.IntVarP(&o.Requests, "requests", "n", 1000, "timed requests")
	f.BoolVar(&o.Stream, "stream", false, "stream each response (SSE), timed to response.completed")
	f.IntVar(&o.ServerPID, "pid", 0, "the server process whose CPU per request is read")
	f.IntVar(&o.SandboxPID, "sandbox-pid", 0, "a second process (the model) whose CPU per request is read")
	return cmd
}

// benchCmd is the driver of `make bench-gateway`.
func benchCmd() *cobra.Command {
	var (
		o      = loadgen.BenchOptions{Model: "sandbox-1", Input: "Explain how the HTTP client reuses connections."}
		bin    string
		vs     string
		out    string
		n1, nN int
		keep   bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--aptix BIN] [--vs OTHER_BIN]",
		Short: "Measure the gateway of `aptix up` from outside against the sandbox called directly, in rounds",
		Long: "bench runs --rounds rounds. Each starts `BIN sandbox` and `BIN up` (its defaults, APTIX_* and\n" +
			"OPENAI_* removed from its environment, a fresh data dir, free ports, the sandbox as its model),\n" +
			"then at each concurrency runs the sandbox directly, then each gateway (with --vs, OTHER_BIN's up\n" +
			"beside BIN's: direct, A, B in odd rounds, direct, B, A in even ones), then each gateway's 20-round tool loops over WebSocket mode and\n" +
			"HTTP+SSE (--tool-loops), and stops them. Server CPU is the up process's utime+stime from\n" +
			"/proc/<pid>/stat over the timed requests, divided by them. Prints medians with the rounds' range,\n" +
			"B over A per round, the goals met or missed, and writes the samples and summary as JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Bins = []string{bin}
			if vs != "" {
				o.Bins = append(o.Bins, vs)
			}
			o.Requests = map[int]int{}
			for _, c := range o.Concurrencies {
				o.Requests[c] = nN
				if c == 1 {
					o.Requests[c] = n1
				}
			}
			dir, err := os.MkdirTemp("", "aptix-load-")
			if err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(cmd.ErrOrStderr(), "aptix-load: data dirs and server logs in %s\n", dir)
			} else {
				defer os.RemoveAll(dir)
			}
			o.Dir = dir
			o.Progress = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "aptix-load: "+format+"\n", args...) }
			rep, err := loadgen.Bench(ctx, o)
			if err != nil {
				return fmt.Errorf("%w (run with --keep to read the servers' logs)", err)
			}
			if err := loadgen.Table(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if out == "" {
				return nil
			}
			return writeJSON(cmd, out, rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&bin, "aptix", "bin/aptix", "the aptix binary whose sandbox and up are run (gateway A)")
	f.StringVar(&vs, "vs", "", "a second aptix binary whose up is measured too (gateway B), interleaved with A in every round")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds")
	f.IntSliceVar(&o.Concurrencies, "concurrency", []int{1, 64}, "concurrencies, in each round in this order")
	f.IntVar(&n1, "requests-1", 1000, "timed requests per run at concurrency 1")
	f.IntVar(&nN, "requests", 4000, "timed requests per run at every other concurrency")
	f.IntVar(&o.Warmup, "warmup", 200, "requests before each run, not timed")
	f.BoolVar(&o.Stream, "stream", false, "stream each response (SSE), timed to response.completed")
	f.IntVar(&o.ToolLoops, "tool-loops", 10, "20-round tool loops per gateway and round over WebSocket mode and over HTTP+SSE, interleaved (0: none)")
	f.StringArrayVar(&o.Env, "env", nil, "KEY=VALUE added to each up's environment, e.g. APTIX_SYNC=always (repeatable)")
	f.StringVar(&out, "out", "", "write the samples and summary as JSON to this file")
	f.BoolVar(&keep, "keep", false, "keep the data dirs and the servers' logs")
	return cmd
}

func writeJSON(cmd *cobra.Command, file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if file == "" {
		_, err = cmd.OutOrStdout().Write(data)
		return err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "aptix-load: figures written to %s\n", file)
	return nil
}
