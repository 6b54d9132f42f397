package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/bench"
	"github.com/aptix-dev/aptix/cmd/aptix/internal/fsync"
)

// bench measures Aptix against its floors in one process run (`make bench`).
func init() {
	var (
		syncFlag                    string
		out, cpuProfile, memProfile string
		o                           bench.Options
		soakOnly                    bool
	)
	cmd := &cobra.Command{
		Use:   "bench [--out FILE]",
		Short: "Measure turn latency and throughput against a direct call and a raw JetStream chain",
		Long: "bench runs, in this process, on one embedded nats-server: openai-go straight to the sandbox\n" +
			"(the LLM floor), a raw JetStream five-hop chain with Aptix's event sizes (the bus floor), Aptix\n" +
			"itself at concurrency 1, 64 and 256 (sandbox at 0 ms, 8 RAG chunks per turn), the HTTP gateway,\n" +
			"a 20-round client-side tool loop over WebSocket mode vs HTTP+SSE, and (in a child process, the\n" +
			"sandbox in another) a soak of 10,000 turns in flight against a 1 s model. It prints a table and writes the figures as JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if syncFlag != "" {
				p, err := fsync.Parse(syncFlag)
				if err != nil {
					return usagef("--sync: %w", err)
				}
				o.Sync = p
			}
			bench.SelfExec = true // the soak and its sandbox run as child processes of this binary
			o.Progress = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "bench: "+format+"\n", args...) }
			if soakOnly {
				// The soak's process stands for `aptix up`'s (embedded
				// nats-server, every stage): it runs with up's memory limit.
				if _, err := applyMemoryLimit(); err != nil {
					return usagef("%w", err)
				}
				s, err := bench.RunSoak(cmd.Context(), o)
				if err != nil {
					return err
				}
				data, err := json.MarshalIndent(s, "", "  ")
				if err != nil {
					return err
				}
				if out == "" {
					_, err = cmd.OutOrStdout().Write(append(data, '\n'))
					return err
				}
				return os.WriteFile(out, append(data, '\n'), 0o644)
			}
			r, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
					return err
				}
			}
			if err := bench.Table(cmd.OutOrStdout(), r); err != nil {
				return err
			}
			if out != "" {
				data, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: figures written to %s\n", out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "write the figures as JSON to this file")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run")
	f.StringVar(&memProfile, "memprofile", "", "write a heap profile (allocations of the whole run) at the end")
	f.IntVar(&o.LatencyTurns, "latency-turns", 0, "turns at concurrency 1 (default 2000)")
	f.IntVar(&o.ThroughputTurns, "throughput-turns", 0, "turns per throughput run (default 6000)")
	f.IntVar(&o.SoakTurns, "soak-turns", 0, "turns in flight in the soak (default 10000)")
	f.IntVar(&o.SplitTurns, "split-turns", 0, "sequential turns per path whose durable writes are split at the answer, outside the timed runs (default 100)")
	f.BoolVar(&soakOnly, "soak-only", false, "run only the soak (the sandbox in its own process) and print its figures as JSON; bench runs it so as a child process")
	f.DurationVar(&o.SoakLatency, "soak-latency", 0, "model latency in the soak (default 1s)")
	f.BoolVar(&o.Quick, "quick", false, "measure only the direct call, the bus path and the raw chain (no gateway, tool loop or soak): for A/B runs of two builds")
	f.BoolVar(&o.QuickGateway, "quick-gateway", false, "with --quick, measure the HTTP gateway too")
	f.StringVar(&syncFlag, "sync", "", "the embedded server's fsync policy, always or an interval (default: what aptix up ships, "+fsync.Shipped.String()+"); another policy is labelled so in the table")
	root.AddCommand(cmd)
}
