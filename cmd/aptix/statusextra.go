package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// What `aptix status` adds to the streams and consumers: how many replicas
// of each service answer (micro discovery, what `nats micro ls` shows) and
// how many dead letters each stage left, so an operator sees a stage with no
// replica or an outage's dead letters on the same screen as the backlogs.

// otherServices lists the micro services that are not pipeline stages (the
// gateway, say) with their replica counts.
func otherServices(w io.Writer, replicas map[string]int, stages map[string]bool) {
	var names []string
	for name := range replicas {
		if !stages[name] && strings.HasPrefix(name, "aptix-") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "SERVICE\tREPLICAS")
	for _, n := range names {
		fmt.Fprintf(w, "%s\t%d\n", n, replicas[n])
	}
}

// watchStatus redraws the status screen every interval until ctx ends.
func watchStatus(ctx context.Context, out io.Writer, js jetstream.JetStream, lim layout.StreamConfig, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var buf bytes.Buffer
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := printStatus(pctx, &buf, js, lim)
		cancel()
		if err != nil {
			fmt.Fprintf(&buf, "\nstatus: %v\n", err)
		}
		// Home and clear, then the whole screen at once: no flicker of a half-drawn table.
		fmt.Fprintf(out, "\033[H\033[2J%s\n%s, every %s; Ctrl-C stops\n", buf.String(), time.Now().Format("15:04:05"), every)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
